"""Wang et al.'s Piecewise Mechanism (``pm``) for one numeric value.

Wang, Xiao, Yang, Zhao, Hu, Chen, Lin, Shen & Li 2019, "Collecting and Analyzing
Multidimensional Data with Local Differential Privacy" (ICDE; full version arXiv:1907.00782),
Section III-B, Algorithm 2. For t ∈ [−1, 1] (standard units, :mod:`dpkit_ldp._numeric`), with
C = (e^{ε/2} + 1)/(e^{ε/2} − 1) = 1/tanh(ε/4),

    l(t) = (C + 1)/2 · t − (C − 1)/2,     r(t) = l(t) + C − 1,

the report y ∈ [−C, C] has the density

    p = (e^ε − e^{ε/2})/(2e^{ε/2} + 2)  on [l(t), r(t)],      p/e^ε  elsewhere on [−C, C],

i.e. it falls in the band [l, r] (width C − 1) with probability e^{ε/2}/(e^{ε/2} + 1) and is
uniform there, or else uniform on [−C, l) ∪ (r, C] (total length C + 1). The density ratio is at
most e^ε, so the mechanism is ε-LDP. It is unbiased, E[y | t] = t, with (Wang et al., Lemma 1)

    Var[y | t] = t²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²),

largest at |t| = 1: 4e^{ε/2}/(3(e^{ε/2} − 1)²).

**Secure mode** releases a point of a lattice (:mod:`dpkit_ldp._lattice`): the range is cut
into N = 2K cells of width g = 2^e (e from :func:`~dpkit_ldp._lattice.lattice_exponent`: about
2³⁰ cells in the band, at most 2⁶¹ cells in all), cell m has centre
y_m = (m − K + ½)g; the band is H = max(1, round((C − 1)/g)) cells, with exact probabilities
a = π/H inside and b = (1 − π)/(N − H) outside (a/b ≤ e^ε exactly). For a band starting at
cell s, E[y | s] = (a − b)·H·g·(s − K + H/2) (the outside cells are symmetric about 0), linear
in s; the start is the stochastic rounding of s(t) = K − H/2 + t·D with D = 1/((a − b)Hg), so
E[y | t] = t exactly. K is the least integer with D ≤ K − H/2 (so every start lies in
[0, N − H]). This lattice mechanism is its own ε-LDP mechanism (every cell's probability lies in
[b, a] for every input); its variance differs from the continuous one by O(g/(C − 1))
(:meth:`PiecewiseLattice.variance`, exact; the tests find a relative ≤ 3·10⁻⁹ for ε ≤ 45,
7·10⁻⁷ at ε = 60 and 1.3·10⁻³ at ε = 70, where the band is a few hundred cells).

On an accelerator's array, ``randomize`` runs on the device with the same law in either mode
(:mod:`dpkit.tensors.piecewise`): in secure mode this lattice's release, drawn as here from
64-bit words (the same words give the same reports), and float64 reports as here.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    ArrayLibrary,
    LatticeLaw,
    SecureRandom,
    device_operands,
    piecewise_reports,
)
from dpkit_ldp._lattice import BandLattice, lattice_exponent, stochastic_round
from dpkit_ldp._numeric import NumericMechanism, check_scalar, float64_constants

__all__ = [
    "Piecewise",
    "PiecewiseLattice",
    "piecewise_band_width",
    "piecewise_bound",
    "piecewise_lattice",
    "piecewise_log_density",
    "piecewise_report_bound",
    "piecewise_sample",
    "piecewise_variance",
]


def piecewise_bound(epsilon: float) -> float:
    """C = (e^{ε/2} + 1)/(e^{ε/2} − 1) = 1/tanh(ε/4): reports lie in [−C, C]."""
    return 1.0 / math.tanh(epsilon / 4.0)


def piecewise_band_width(epsilon: float) -> float:
    """C − 1 = 2/(e^{ε/2} − 1), computed directly (C − 1 in floats loses it at large ε)."""
    return 2.0 / math.expm1(epsilon / 2.0)


def _band_probability(epsilon: float) -> float:
    """e^{ε/2}/(e^{ε/2} + 1): the probability of the band [l, r]."""
    return 1.0 / (1.0 + math.exp(-epsilon / 2.0))


def piecewise_variance(t: Any, epsilon: float) -> NDArray[np.float64]:
    """Var[y | t] = t²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²) (Wang et al., Lemma 1)."""
    gap = math.expm1(epsilon / 2.0)
    t2 = np.square(np.asarray(t, dtype=np.float64))
    return np.asarray(t2 / gap + (gap + 4.0) / (3.0 * gap**2), dtype=np.float64)


def piecewise_log_density(y: Any, t: Any, epsilon: float) -> NDArray[np.float64]:
    """log of the density of a report y (standard units) given t; −inf outside [−C, C]."""
    y_arr, t_arr = np.broadcast_arrays(
        np.asarray(y, dtype=np.float64), np.asarray(t, dtype=np.float64)
    )
    return np.asarray(_log_density(np, None, y_arr, t_arr, epsilon), dtype=np.float64)


def _log_density(xp: Any, device: Any, y: Any, t: Any, epsilon: float) -> Any:
    """:func:`piecewise_log_density` of float64 arrays of the namespace ``xp`` on ``device``
    (numpy's on the host): the logarithms are constants, the arrays only multiplied, added and
    compared, so an accelerator's numbers are the host's."""
    c, width = piecewise_bound(epsilon), piecewise_band_width(epsilon)
    left = (1.0 + width / 2.0) * t - width / 2.0  # (C + 1)/2·t − (C − 1)/2
    right = left + width
    # log p = log(π_band/(C − 1)), computed as log π_band − log(C − 1).
    log_high = -math.log1p(math.exp(-epsilon / 2.0)) - math.log(width)
    inside = (y >= left) & (y <= right)
    within = (y >= -c) & (y <= c)
    high, low, none = float64_constants(xp, device, log_high, log_high - epsilon, -math.inf)
    return xp.where(within, xp.where(inside, high, low), none)


def _sample_fast(t: NDArray[np.float64], epsilon: float, rng: Any) -> NDArray[np.float64]:
    c, width = piecewise_bound(epsilon), piecewise_band_width(epsilon)
    left = (1.0 + width / 2.0) * t - width / 2.0
    in_band = rng.random(t.size) < _band_probability(epsilon)
    u = rng.random(t.size)
    band = left + width * u
    # Outside: a uniform point of [−C, l) ∪ (r, C], total length C + 1 = 2 + width.
    w = (2.0 + width) * u
    below = left + c
    outside = np.where(w < below, w - c, w - below + left + width)
    result: NDArray[np.float64] = np.where(in_band, band, outside)
    return result


@attrs.frozen
class PiecewiseLattice:
    """The secure lattice of the piecewise mechanism at one ε (module docstring)."""

    epsilon: float
    exponent: int
    half_cells: int
    lattice: BandLattice

    @property
    def step(self) -> Fraction:
        """g = 2^e."""
        return Fraction(2) ** self.exponent

    @property
    def stretch(self) -> Fraction:
        """D = 1/((a − b)·H·g): start cells per standard unit of t."""
        band = self.lattice
        return 1 / ((band.high - band.low) * band.band * self.step)

    @property
    def centre(self) -> Fraction:
        """K − H/2: the start at t = 0."""
        return self.half_cells - Fraction(self.lattice.band, 2)

    def values(self, cells: NDArray[np.int64]) -> NDArray[np.float64]:
        """y_m = (m − K + ½)·g (exact in float64: a half-integer times a power of two)."""
        offset = (cells - self.half_cells).astype(np.float64) + 0.5
        result: NDArray[np.float64] = np.ldexp(offset, self.exponent)
        return result

    def device_law(self) -> LatticeLaw:
        """This lattice in the public numbers of the device path (:mod:`dpkit.tensors.lattice`):
        the start c = (K − H/2) + t·D, cell m reported as ((m − K) + ½)·g."""
        band = self.lattice
        return LatticeLaw(
            offset=float(self.centre),
            stretch=float(self.stretch),
            cells=band.cells,
            band=band.band,
            threshold=band.threshold,
            exponent=self.exponent,
            shift=self.half_cells,
        )

    def sample(self, t: NDArray[np.float64], generator: Any) -> NDArray[np.float64]:
        position = float(self.centre) + t * float(self.stretch)
        starts = stochastic_round(position, generator, high=self.lattice.free_starts)
        return self.values(self.lattice.sample(starts, generator))

    def variance(self, t: Fraction) -> Fraction:
        """Var[y | t] of the lattice mechanism, exactly, for a rational t in [−1, 1] (the start
        coin taken at its exact probability frac(s(t)), ignoring the 2⁻⁵³ grid)."""
        band, g, k = self.lattice, self.step, self.half_cells
        position = self.centre + t * self.stretch
        floor = position.numerator // position.denominator
        total = Fraction(0)
        for start, weight in ((floor, 1 - (position - floor)), (floor + 1, position - floor)):
            if weight:
                total += weight * _second_moment(band, g, k, min(start, band.free_starts))
        return total - t * t


def _square_sum(first: int, last: int) -> int:
    """Σ (2j + 1)² for j = first .. last − 1 (twice the cell centres over g, squared)."""

    def upto(n: int) -> int:  # Σ_{j=0}^{n−1} (2j + 1)² = n(2n − 1)(2n + 1)/3
        return n * (2 * n - 1) * (2 * n + 1) // 3

    # Cells j = m − K have centres (2j + 1)g/2; j = −i (i ≥ 1) mirrors j = i − 1.
    if first >= 0:
        return upto(last) - upto(first)
    if last <= 0:
        return upto(-first) - upto(-last)
    return upto(-first) + upto(last)


def _second_moment(band: BandLattice, g: Fraction, k: int, start: int) -> Fraction:
    """E[y² | start] = b·Σ_all y_m² + (a − b)·Σ_band y_m², exactly."""
    scale = g * g / 4
    everything = _square_sum(-k, k)
    inside = _square_sum(start - k, start - k + band.band)
    return scale * (band.low * everything + (band.high - band.low) * inside)


@lru_cache(maxsize=256)
def piecewise_lattice(epsilon: float, exponent: int | None = None) -> PiecewiseLattice:
    """The lattice for ε (``exponent`` overrides e, for tests on coarse lattices)."""
    c = piecewise_bound(epsilon)
    width = piecewise_band_width(epsilon)
    e = lattice_exponent(width, 2.0 * c) if exponent is None else exponent
    g = Fraction(2) ** e
    band = max(1, round(width / float(g)))
    k = max(math.ceil(c / float(g)), band)
    # Raising K by Δ raises K − H/2 by Δ and D by about f·Δ, f = 2/((e^ε − 1)·H·g) < 1.
    growth = 2.0 / (math.expm1(epsilon) * band * float(g))
    while True:
        candidate = PiecewiseLattice(epsilon, e, k, BandLattice.build(epsilon, 2 * k, band))
        deficit = candidate.stretch - candidate.centre
        if deficit <= 0:
            return candidate
        k += max(1, math.ceil(float(deficit) / max(1.0 - growth, 1e-3)))


def piecewise_report_bound(epsilon: float) -> float:
    """The largest report magnitude in either mode: C, or the lattice's outermost centre."""
    lattice = piecewise_lattice(epsilon)
    outermost = (lattice.half_cells - Fraction(1, 2)) * lattice.step
    return max(piecewise_bound(epsilon), float(outermost))


def piecewise_sample(t: NDArray[np.float64], epsilon: float, generator: Any) -> NDArray[np.float64]:
    """One report per t (standard units): floats in fast mode, lattice values in secure mode."""
    flat = np.asarray(t, dtype=np.float64).reshape(-1)
    if isinstance(generator, SecureRandom):
        out = piecewise_lattice(epsilon).sample(flat, generator)
    else:
        out = _sample_fast(flat, epsilon, generator)
    return out.reshape(np.shape(t))


@attrs.frozen
class Piecewise(NumericMechanism):
    """The Piecewise Mechanism of Wang et al. 2019 (module docstring), on ``[lower, upper]``.

    Reports lie in ``centre ± scale·C``; E[report] = the value, Var = scale²·Var[y | t].
    """

    name: ClassVar[str] = "pm"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    statistic: ClassVar[str] = "mean"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    @property
    def bound(self) -> float:
        """C in standard units."""
        return piecewise_bound(self.epsilon)

    def _device_reports(self, library: ArrayLibrary, values: Any, rng: Any) -> Any:
        return piecewise_reports(
            library,
            values,
            units=self.units,
            epsilon=self.epsilon,
            lattice=piecewise_lattice(self.epsilon).device_law(),
            rng=rng,
            owner=self.name,
        )

    def _sample(self, t: NDArray[np.float64], generator: Any) -> NDArray[np.float64]:
        return piecewise_sample(t, self.epsilon, generator)

    def _standard_variance(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return piecewise_variance(t, self.epsilon)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """The log-density of a report on the data's scale (fast mode's continuous law; secure
        mode's lattice law is :class:`PiecewiseLattice` 's, within O(g) of it).

        An accelerator's array (either operand) is scored on its device, float64, in its type,
        by the same operations in its namespace (:mod:`dpkit.tensors.log_probability`: a numpy
        or list operand beside it is copied there), so the host's numbers.
        """
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            library = operands.library
            y, t = self.standard_operands(library.xp, *operands.reals(owner=self.name))
            density = _log_density(library.xp, library.device, y, t, self.epsilon)
            return density - math.log(self.scale)
        y = self.from_data(np.asarray(outputs, dtype=np.float64))
        t = self.standardize(np.asarray(inputs, dtype=np.float64))
        return piecewise_log_density(y, t, self.epsilon) - math.log(self.scale)

    def report_bound(self) -> NDArray[np.float64]:
        """The largest report magnitude in standard units (C, or the secure lattice's end)."""
        return np.array([piecewise_report_bound(self.epsilon)])

    def worst_case_variance(self) -> NDArray[np.float64]:
        """4e^{ε/2}/(3(e^{ε/2} − 1)²) (at |t| = 1), in standard units."""
        return piecewise_variance(np.ones(1), self.epsilon)

    @classmethod
    def mean_variance(cls, *, epsilon: float, dimension: int = 1, n: int = 1) -> float:
        """Worst-case variance of the mean of n reports on [−1, 1]: 4e^{ε/2}/(3n(e^{ε/2} − 1)²)
        (Wang et al. 2019, Section III-B)."""
        check_scalar(cls.name, dimension)
        return float(piecewise_variance(1.0, epsilon)) / n
