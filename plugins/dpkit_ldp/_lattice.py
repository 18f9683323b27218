"""Secure mode of the banded mechanisms (pm, sw): exact sampling on a lattice of cells.

The piecewise mechanism (Wang et al. 2019) and the square wave (Li et al. 2020) have a
two-level output density: a high level on a band around the input, a low level e^ε times smaller
elsewhere on a fixed range. Sampled with floating point (fast mode), such an output leaks the
input through its low bits (Mironov 2012, CCS). In secure mode they release a lattice point
instead, drawn exactly:

* the output range is cut into N cells of width g (a power of two); the band is H consecutive
  cells starting at cell s;
* P[cell m | s] = a for the H cells of the band, b for the N − H others, with
  a = π/H, b = (1 − π)/(N − H) and π = T/2⁶⁴ the probability of landing in the band;
* T = ⌊π*·2⁶⁴⌋ with π* = e^ε H/(e^ε H + N − H) evaluated in 60-digit decimal arithmetic from
  the exact value of ε (the value where a/b = e^ε), so π ≤ π* and a/b ≤ e^ε — the rounding can
  only add privacy;
* the band's start s moves continuously with the input by *stochastic rounding*: a real
  position c becomes ⌊c⌋ + 1 with probability frac(c) (a uniform on the 2⁻⁵³ grid compared
  with frac(c)), ⌊c⌋ otherwise.

**Privacy, exactly.** For a fixed start every cell has probability a or b; the law given the
input is a mixture over (at most two) starts, so every cell's probability lies in [b, a],
whatever the input, the rounding of c and the coin: the ratio between any two inputs is at most
a/b ≤ e^ε. (This is the discretised mechanism's own guarantee; it does not rely on the
continuous one.) The band coin is one 64-bit word against T, the cell within the band or outside
it an exactly uniform integer (:meth:`dpkit.SecureRandom.integers`, by rejection): no floating
point touches the released cell, which the mechanism maps to a fixed lattice value.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BandLattice",
    "band_threshold",
    "epsilon_decimal",
    "lattice_exponent",
    "stochastic_round",
]

_U64 = 1 << 64
_CONTEXT = decimal.Context(prec=60)
#: Far above the ~1e-40 error of 60-digit arithmetic at 2⁶⁴, far below one unit of T.
_MARGIN = decimal.Decimal("1e-20")


#: Cells across the band (when the range allows), and the most cells in all (int64 headroom).
BAND_CELLS_LOG2 = 30
MAX_CELLS_LOG2 = 61


def lattice_exponent(band_width: float, range_width: float) -> int:
    """e for cells of width 2^e: the band ``band_width`` spans at least 2²⁹ cells unless the
    range ``range_width`` would then need more than 2⁶¹ cells. The finer the cells, the closer
    the lattice mechanism's variance to the continuous one's."""
    fine = math.ceil(math.log2(band_width)) - BAND_CELLS_LOG2 if band_width > 0 else -1 << 20
    return max(fine, math.ceil(math.log2(range_width)) + 1 - MAX_CELLS_LOG2)


def epsilon_decimal(epsilon: float) -> decimal.Decimal:
    """The smaller of a double ε's two readings, its exact value and its shortest decimal (what
    the ledger charges, :func:`dpkit.plugin.exact`): the ε an exact threshold may realise."""
    return min(decimal.Decimal(epsilon), decimal.Decimal(repr(epsilon)))


def band_threshold(epsilon: float, cells: int, band: int) -> int:
    """T = ⌊2⁶⁴·e^ε H/(e^ε H + N − H)⌋ (minus a margin below the decimal error), so T/2⁶⁴ ≤ π*,
    with ε at the smaller of its readings (:func:`epsilon_decimal`).

    Rounding down guards a/b ≤ e^ε only. At the uniform point π = H/N the two levels are equal;
    where ε is so small that π* lies within 2⁻⁶⁴ of H/N, T/2⁶⁴ can fall below H/N, and then
    b/a = (2⁶⁴ − T)H/(T(N − H)) > 1 is the ratio that matters (the piecewise lattice at
    ε = 2.03·10⁻¹⁹: b/a = e^{3.3·10⁻¹⁹}). Such (ε, N, H), for which no T keeps both ratios
    within e^ε, raise :class:`ValueError`: the mechanisms' ε ≥ 10⁻¹² (and pm_multi's ε/k ≥
    2.4·10⁻¹⁶) never reach them, so this only guards the construction (Kairouz, Bonawitz &
    Ramage 2016, §2.2, for the two-sided ratio of a randomized response).
    """
    odds = _CONTEXT.exp(epsilon_decimal(epsilon))
    high = _CONTEXT.multiply(odds, decimal.Decimal(band))
    share = _CONTEXT.divide(high, _CONTEXT.add(high, decimal.Decimal(cells - band)))
    scaled = _CONTEXT.subtract(_CONTEXT.multiply(share, decimal.Decimal(_U64)), _MARGIN)
    threshold = max(0, int(scaled.to_integral_value(decimal.ROUND_FLOOR)))
    if threshold * cells < band * _U64:  # below the uniform point: is b/a ≤ e^ε?
        reverse = _CONTEXT.divide(
            decimal.Decimal((_U64 - threshold) * band), decimal.Decimal(threshold * (cells - band))
        )
        if threshold == 0 or reverse > _CONTEXT.subtract(odds, _MARGIN):
            raise ValueError(
                f"epsilon={epsilon} is too small for a band of {band} of {cells} cells: on the "
                "2^-64 grid the band probability falls below the uniform point"
            )
    return threshold


@attrs.frozen
class BandLattice:
    """N cells, a band of H of them, and the exact band probability T/2⁶⁴ (see the module)."""

    epsilon: float
    cells: int
    band: int
    threshold: int

    @classmethod
    def build(cls, epsilon: float, cells: int, band: int) -> BandLattice:
        if not 1 <= band < cells:
            raise ValueError(f"band {band} must be in [1, {cells})")
        return cls(epsilon, cells, band, band_threshold(epsilon, cells, band))

    @property
    def high(self) -> Fraction:
        """a: the exact probability of each cell of the band."""
        return Fraction(self.threshold, _U64 * self.band)

    @property
    def low(self) -> Fraction:
        """b: the exact probability of each cell outside the band."""
        return Fraction(_U64 - self.threshold, _U64 * (self.cells - self.band))

    @property
    def free_starts(self) -> int:
        """The largest start, N − H."""
        return self.cells - self.band

    def sample(self, starts: NDArray[np.int64], generator: Any) -> NDArray[np.int64]:
        """One cell per start: in the band with probability T/2⁶⁴, uniform there or outside."""
        n = starts.shape[0]
        inside = generator.bernoulli_threshold(self.threshold, n)
        cells = np.empty(n, dtype=np.int64)
        where_in = np.flatnonzero(inside)
        where_out = np.flatnonzero(~inside)
        cells[where_in] = starts[where_in] + generator.integers(
            0, self.band, size=where_in.size, dtype=np.int64
        )
        other = generator.integers(0, self.free_starts, size=where_out.size, dtype=np.int64)
        # The N − H cells outside [s, s + H) in order: skip the band.
        cells[where_out] = other + self.band * (other >= starts[where_out])
        return cells

    def log_probabilities(self, cells: NDArray[Any], starts: NDArray[Any]) -> NDArray[np.float64]:
        """log P[cell | start] (a float view of the exact law, for the declared distribution)."""
        inside = (cells >= starts) & (cells < starts + self.band)
        return np.where(inside, math.log(self.high), math.log(self.low))


def stochastic_round(
    position: NDArray[np.float64], generator: Any, *, high: int
) -> NDArray[np.int64]:
    """⌊c⌋ + 1 with probability frac(c), else ⌊c⌋ (u < frac(c) for u uniform on the 2⁻⁵³ grid),
    clamped to [0, high]: unbiased for c inside [0, high]."""
    floor = np.floor(position)
    up = generator.random(position.shape[0]) < (position - floor)
    starts = floor.astype(np.int64) + up
    clamped: NDArray[np.int64] = np.clip(starts, 0, high)
    return clamped
