"""The Square Wave mechanism (``sw``) and its EM / EMS distribution estimator.

Li, Wang, Lopuhaä-Zwakenberg, Škorić & Li 2020, "Estimating Numerical Distributions under Local
Differential Privacy" (SIGMOD; arXiv:1912.01051), Sections 4–5. For v ∈ [0, 1] (the value in standard
units: v = (x − lower)/(upper − lower)) the report ṽ ∈ [−b, 1 + b] has the density

    p = e^ε/(2b e^ε + 1)  if |ṽ − v| ≤ b,        q = 1/(2b e^ε + 1)  otherwise,

with p/q = e^ε (ε-LDP) and p·2b + q·1 = 1. The half-width maximises an upper bound of the
mutual information between v and ṽ (their Section 4):

    b = (ε e^ε − e^ε + 1) / (2e^ε (e^ε − 1 − ε)),

computed here in 60-digit decimal arithmetic (both numerator and denominator cancel to O(ε²)
as ε → 0, where b → 1/2). Sampling: the band [v − b, v + b] with probability 2bp, uniformly;
otherwise a uniform point of [−b, v − b) ∪ (v + b, 1 + b], whose total length is 1.

**Estimation** (their Section 5). The reports are counted in ``bins`` equal buckets B̃_j of
[−b, 1 + b] (:class:`dpkit.plugin.ReportHistogram`, mergeable), and the distribution θ over ``bins``
equal buckets B_i of [0, 1] is reconstructed by expectation maximisation on the transition
matrix

    M[j, i] = P[ṽ ∈ B̃_j | v uniform in B_i] = q|B̃_j| + (p − q)·(1/|B_i|)∫_{B_i} |B̃_j ∩ [v − b, v + b]| dv,

whose columns sum to 1. The overlap length is a sum of four ramps, R(v + b − lo) − R(v − b − lo)
− R(v + b − hi) + R(v − b − hi) with R(x) = max(x, 0), so the integral is exact in closed form
(differences of R²/2). EM: θ ← θ ⊙ Mᵀ(c / Mθ)/n from the uniform θ; **EMS** adds after each step
the smoothing θ_i ← (θ_{i−1} + 2θ_i + θ_{i+1})/4 (binomial weights; (2θ_0 + θ_1)/3 and
(θ_{d−2} + 2θ_{d−1})/3 at the ends) and renormalises. Both stop when the log-likelihood
Σ_j c_j log(Mθ)_j changes by less than ``tolerance`` per report (1e-9) or after
``max_iterations`` (10,000). EMS is the default (Li et al. show it beats EM, which overfits the
noise). The result is a :class:`dpkit.plugin.DistributionEstimate` (biased; no variance).

**Secure mode** releases a lattice point (:mod:`dpkit_ldp._lattice`): [0, 1] is cut into
M = 2^−e cells of width g = 2^e (e ≤ −32, and fine enough for about 2³⁰ cells across the band
while M ≤ 2⁶¹), the band is H = max(1, round(2b/g)) cells and the range N = M + H cells; the
band's start is the stochastic rounding of v·M, so the band is [v − b′, v + b′] in expectation
with b′ = Hg/2 (|b′ − b| ≤ g/2: a relative 2⁻³⁰ of b for ε up to about 40); the released value
is the centre of the drawn cell. Each cell has probability
a or b with a/b ≤ e^ε exactly, so the lattice mechanism is ε-LDP by itself. The estimator's
transition matrix is that of the continuous mechanism; the lattice law is within O(2⁻³²) of it.

On an accelerator's array, ``randomize`` runs on the device with the same law in either mode
(:mod:`dpkit.tensors.square_wave`): in secure mode this lattice's release, drawn as here from
64-bit words (the same words give the same reports), and float64 reports as here.
"""

from __future__ import annotations

import decimal
import math
from functools import lru_cache
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    ArrayLibrary,
    DistributionEstimate,
    Estimator,
    Integer,
    InvalidData,
    LatticeLaw,
    ReportHistogram,
    SecureRandom,
    array_library,
    device_operands,
    parameter,
    report_histogram,
    square_wave_reports,
)
from dpkit_ldp._lattice import BandLattice, lattice_exponent, stochastic_round
from dpkit_ldp._numeric import (
    NumericMechanism,
    float64_constants,
    lower_parameter,
    real_reports,
    upper_parameter,
)

__all__ = [
    "MAX_ITERATIONS",
    "TOLERANCE",
    "SquareWave",
    "SquareWaveEstimator",
    "bucket_probabilities",
    "reconstruct",
    "square_wave_half_width",
    "transition_matrix",
]

#: EM / EMS stop when the log-likelihood changes by less than this per report ...
TOLERANCE = 1e-9
#: ... or after this many iterations.
MAX_ITERATIONS = 10_000


@lru_cache(maxsize=256)
def square_wave_half_width(epsilon: float) -> float:
    """b = (ε e^ε − e^ε + 1)/(2e^ε(e^ε − 1 − ε)), in 60-digit decimal arithmetic."""
    context = decimal.Context(prec=60)
    eps = decimal.Decimal(epsilon)
    odds = context.exp(eps)
    numerator = context.add(context.subtract(context.multiply(eps, odds), odds), 1)
    denominator = context.multiply(2 * odds, context.subtract(context.subtract(odds, 1), eps))
    return float(context.divide(numerator, denominator))


def _densities(epsilon: float) -> tuple[float, float]:
    """(p, q) = (e^ε, 1)/(2b e^ε + 1), computed without overflow: p = 1/(2b + e^−ε)."""
    b = square_wave_half_width(epsilon)
    tail = math.exp(-epsilon)
    return 1.0 / (2.0 * b + tail), tail / (2.0 * b + tail)


def _ramp_square(x: NDArray[np.float64]) -> NDArray[np.float64]:
    positive = np.maximum(x, 0.0)
    result: NDArray[np.float64] = positive * positive / 2.0
    return result


def _overlap_integral(
    a1: NDArray[np.float64],
    a2: NDArray[np.float64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    b: float,
) -> NDArray[np.float64]:
    """∫_{a1}^{a2} |[lo, hi] ∩ [v − b, v + b]| dv, exactly (broadcasting)."""
    total = np.zeros(np.broadcast_shapes(a1.shape, lo.shape))
    for shift, sign in ((b - lo, 1.0), (-b - lo, -1.0), (b - hi, -1.0), (-b - hi, 1.0)):
        total = total + sign * (_ramp_square(a2 + shift) - _ramp_square(a1 + shift))
    return total


def _overlap(
    v: NDArray[np.float64], lo: NDArray[np.float64], hi: NDArray[np.float64], b: float
) -> NDArray[np.float64]:
    """|[lo, hi] ∩ [v − b, v + b]| (broadcasting)."""
    result: NDArray[np.float64] = np.maximum(np.minimum(v + b, hi) - np.maximum(v - b, lo), 0.0)
    return result


def _report_edges(epsilon: float, bins: int) -> NDArray[np.float64]:
    b = square_wave_half_width(epsilon)
    return np.linspace(-b, 1.0 + b, bins + 1)


@lru_cache(maxsize=64)
def transition_matrix(epsilon: float, bins: int) -> NDArray[np.float64]:
    """M[j, i] = P[report in bucket j | value uniform in input bucket i] (module docstring)."""
    b = square_wave_half_width(epsilon)
    p, q = _densities(epsilon)
    out_edges = _report_edges(epsilon, bins)
    in_edges = np.linspace(0.0, 1.0, bins + 1)
    lo, hi = out_edges[:-1, None], out_edges[1:, None]
    a1, a2 = in_edges[None, :-1], in_edges[None, 1:]
    mean_overlap = _overlap_integral(a1, a2, lo, hi, b) / (a2 - a1)
    matrix = q * (hi - lo) + (p - q) * mean_overlap
    matrix.setflags(write=False)
    return matrix


def bucket_probabilities(epsilon: float, bins: int, values: Any) -> NDArray[np.float64]:
    """P[report in bucket j | v] for each v (standard units): rows of shape (len(v), bins)."""
    b = square_wave_half_width(epsilon)
    p, q = _densities(epsilon)
    edges = _report_edges(epsilon, bins)
    v = np.asarray(values, dtype=np.float64)[:, None]
    lo, hi = edges[None, :-1], edges[None, 1:]
    probabilities = q * (hi - lo) + (p - q) * _overlap(v, lo, hi, b)
    result: NDArray[np.float64] = probabilities / probabilities.sum(axis=1, keepdims=True)
    return result


def _smooth(theta: NDArray[np.float64]) -> NDArray[np.float64]:
    """Binomial (1, 2, 1)/4 smoothing, (2, 1)/3 and (1, 2)/3 at the ends, renormalised."""
    if theta.size < 3:
        return theta
    out = np.empty_like(theta)
    out[1:-1] = (theta[:-2] + 2.0 * theta[1:-1] + theta[2:]) / 4.0
    out[0] = (2.0 * theta[0] + theta[1]) / 3.0
    out[-1] = (theta[-2] + 2.0 * theta[-1]) / 3.0
    result: NDArray[np.float64] = out / out.sum()
    return result


def _log_likelihood(counts: NDArray[np.float64], predicted: NDArray[np.float64]) -> float:
    used = counts > 0
    return float(np.dot(counts[used], np.log(predicted[used])))


def reconstruct(
    matrix: NDArray[np.float64],
    counts: NDArray[Any],
    *,
    smooth: bool = True,
    tolerance: float = TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
) -> tuple[NDArray[np.float64], int, bool, float]:
    """EM (``smooth=False``) or EMS on ``matrix`` (reports × inputs) and report ``counts``.

    Returns (θ, iterations, converged, log-likelihood). With no reports θ stays uniform.
    """
    c = np.asarray(counts, dtype=np.float64)
    n = float(c.sum())
    theta = np.full(matrix.shape[1], 1.0 / matrix.shape[1])
    predicted = matrix @ theta
    if n == 0:
        return theta, 0, True, 0.0
    previous = _log_likelihood(c, predicted)
    for iteration in range(1, max_iterations + 1):
        ratio = np.divide(c, predicted, out=np.zeros_like(c), where=c > 0)
        theta = theta * (matrix.T @ ratio) / n
        theta /= theta.sum()
        if smooth:
            theta = _smooth(theta)
        predicted = matrix @ theta
        current = _log_likelihood(c, predicted)
        if abs(current - previous) < tolerance * n:
            return theta, iteration, True, current
        previous = current
    return theta, max_iterations, False, previous


@attrs.frozen
class SquareWaveLattice:
    """The secure lattice at one ε: cells of width 2^e, M = 2^−e of them per unit of the input,
    a band of H cells, N = M + H cells in all (module docstring)."""

    exponent: int
    lattice: BandLattice

    @property
    def per_unit(self) -> int:
        return 1 << -self.exponent

    def device_law(self) -> LatticeLaw:
        """This lattice in the public numbers of the device path (:mod:`dpkit.tensors.lattice`):
        the start c = v·M, cell m reported as (m + ½ − H/2)·g."""
        band = self.lattice
        return LatticeLaw(
            offset=0.0,
            stretch=float(self.per_unit),
            cells=band.cells,
            band=band.band,
            threshold=band.threshold,
            exponent=self.exponent,
            half=band.band / 2.0,
        )

    def sample(self, v: NDArray[np.float64], generator: Any) -> NDArray[np.float64]:
        starts = stochastic_round(v * self.per_unit, generator, high=self.per_unit)
        cells = self.lattice.sample(starts, generator)
        offset = cells.astype(np.float64) + 0.5 - self.lattice.band / 2.0
        values: NDArray[np.float64] = np.ldexp(offset, self.exponent)
        return values


@lru_cache(maxsize=256)
def square_wave_lattice(epsilon: float) -> SquareWaveLattice:
    """Cells of width 2^e (:func:`~dpkit_ldp._lattice.lattice_exponent` for a band of 2b in a
    range of 1 + 2b), a band of H = max(1, round(2b·2^−e)) cells."""
    width = 2.0 * square_wave_half_width(epsilon)
    exponent = min(-32, lattice_exponent(width, 1.0 + width))
    per_unit = 1 << -exponent
    band = max(1, round(width * per_unit))
    return SquareWaveLattice(exponent, BandLattice.build(epsilon, per_unit + band, band))


def square_wave_sample(
    v: NDArray[np.float64], epsilon: float, generator: Any
) -> NDArray[np.float64]:
    """One report per v ∈ [0, 1] (standard units): floats (fast) or lattice centres (secure)."""
    flat = np.asarray(v, dtype=np.float64).reshape(-1)
    if isinstance(generator, SecureRandom):
        out = square_wave_lattice(epsilon).sample(flat, generator)
    else:
        b = square_wave_half_width(epsilon)
        p, _ = _densities(epsilon)
        in_band = generator.random(flat.size) < 2.0 * b * p
        u = generator.random(flat.size)
        band = flat - b + 2.0 * b * u
        outside = np.where(u < flat, u - b, u + b)  # [−b, v − b) ∪ (v + b, 1 + b]
        out = np.where(in_band, band, outside)
    result: NDArray[np.float64] = out.reshape(np.shape(v))
    return result


@attrs.frozen
class SquareWave(NumericMechanism):
    """The Square Wave mechanism of Li et al. 2020 on ``[lower, upper]`` (module docstring).

    Reports lie in ``[lower − b·w, upper + b·w]`` (w = upper − lower). ``bins`` is the number of
    buckets of the reconstructed distribution (and of the report histogram).
    """

    name: ClassVar[str] = "sw"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    statistic: ClassVar[str] = "distribution"
    standard: ClassVar[tuple[float, float]] = (0.0, 1.0)
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    lower: float = lower_parameter(0.0)
    upper: float = upper_parameter(1.0)
    bins: int = parameter(
        Integer(low=2, high=4096), doc="buckets of the estimated distribution", default=256
    )

    def _device_reports(self, library: ArrayLibrary, values: Any, rng: Any) -> Any:
        return square_wave_reports(
            library,
            values,
            units=self.units,
            epsilon=self.epsilon,
            half_width=self.half_width,
            lattice=square_wave_lattice(self.epsilon).device_law(),
            rng=rng,
            owner=self.name,
        )

    def _sample(self, t: NDArray[np.float64], generator: Any) -> NDArray[np.float64]:
        return square_wave_sample(t, self.epsilon, generator)

    @property
    def half_width(self) -> float:
        """b, in standard units (a fraction of upper − lower)."""
        return square_wave_half_width(self.epsilon)

    @property
    def densities(self) -> tuple[float, float]:
        """(p, q) in standard units."""
        return _densities(self.epsilon)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """The log-density of a report on the data's scale (fast mode's continuous law).

        An accelerator's array (either operand) is scored on its device, float64, in its type,
        by the same operations in its namespace (:mod:`dpkit.tensors.log_probability`: a numpy
        or list operand beside it is copied there), so the host's numbers.
        """
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            library = operands.library
            y, v = self.standard_operands(library.xp, *operands.reals(owner=self.name))
            return self._log_density(library.xp, library.device, y, v)
        y = self.from_data(np.asarray(outputs, dtype=np.float64))
        v = self.standardize(np.asarray(inputs, dtype=np.float64))
        return np.asarray(self._log_density(np, None, y, v), dtype=np.float64)

    def _log_density(self, xp: Any, device: Any, y: Any, v: Any) -> Any:
        """The log-density of float64 arrays of the namespace ``xp`` on ``device`` (numpy's on
        the host), y and v in standard units: the logarithms are constants, the arrays only
        subtracted, compared and selected, so an accelerator's numbers are the host's."""
        b = self.half_width
        p, q = self.densities
        high, low, none = float64_constants(xp, device, math.log(p), math.log(q), -math.inf)
        within = (y >= -b) & (y <= 1.0 + b)
        density = xp.where(xp.abs(y - v) <= b, high, low) - math.log(self.scale)
        return xp.where(within, density, none)

    @property
    def report_edges(self) -> NDArray[np.float64]:
        """The edges of the report buckets, on the data's scale."""
        return self.to_data(_report_edges(self.epsilon, self.bins))

    @property
    def edges(self) -> NDArray[np.float64]:
        """The edges of the estimated distribution's buckets, on the data's scale."""
        return np.linspace(self.lower, self.upper, self.bins + 1)


class SquareWaveEstimator(Estimator):
    """Report histogram → distribution over ``bins`` buckets by EMS (default) or EM."""

    methods: ClassVar[tuple[str, ...]] = ("ems", "em")
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: SquareWave

    def accumulate(self, reports: Any, /) -> ReportHistogram:
        """The histogram of the reports over ``bins`` equal buckets of the report range; an
        accelerator's reports are counted there (:mod:`dpkit.tensors.report_histogram`)."""
        mech = self.mechanism
        owner = f"{mech.name} estimator"
        b = mech.half_width
        # The secure lattice's band can be wider than 2b by a cell (≤ 2⁻³²); rounding on the
        # data's scale moves a report by a few ulps of the bounds.
        slack = 2.0**-31 + mech.report_slack
        describe = (
            f"square-wave reports of this mechanism (outside [{mech.report_edges[0]:g}, "
            f"{mech.report_edges[-1]:g}] or NaN)"
        )
        library = array_library(reports, owner=owner, field="reports")
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            found, n = report_histogram(
                library,
                reports,
                centre=mech.centre,
                scale=mech.scale,
                half_width=b,
                slack=slack,
                bins=mech.bins,
                describe=describe,
                owner=owner,
            )
            return ReportHistogram(mech.name, found, n)
        y = mech.from_data(real_reports(reports, owner).reshape(-1))
        bad = ~((y >= -b - slack) & (y <= 1.0 + b + slack))
        if bad.any():
            raise InvalidData(
                f"{owner}: {int(np.count_nonzero(bad))} report(s) are not {describe}",
                field="reports",
            )
        position = np.floor((y + b) / (1.0 + 2.0 * b) * mech.bins).astype(np.int64)
        counts = np.bincount(np.clip(position, 0, mech.bins - 1), minlength=mech.bins)
        return ReportHistogram(mech.name, counts, y.size)

    def estimate(self, statistics: Any, /, *, method: str = "ems") -> DistributionEstimate:
        self.check_method(method)
        mech = self.mechanism
        if (
            not isinstance(statistics, ReportHistogram)
            or statistics.mechanism != mech.name
            or statistics.counts.shape != (mech.bins,)
        ):
            raise InvalidData(
                f"expected the ReportHistogram of {mech.name!r} with {mech.bins} buckets",
                field="statistics",
            )
        theta, iterations, converged, likelihood = reconstruct(
            transition_matrix(mech.epsilon, mech.bins),
            statistics.counts,
            smooth=method == "ems",
        )
        return DistributionEstimate(
            mech.name,
            method,
            statistics.n,
            mech.edges,
            theta,
            iterations,
            converged,
            likelihood,
        )
