"""Mean: the mean of values clamped to [lower, upper], released as a noisy centred sum over a
noisy count (per group over a table)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    BOUND,
    CENTRAL_EPSILON,
    DELTA,
    Choice,
    ColumnKind,
    CompositeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    SecureRandom,
    parameter,
    resolve_rng,
)
from dpkit_central._noise import AdditiveNoise
from dpkit_central._query import (
    NAN_POLICY,
    Query,
    QueryResult,
    bounds_check,
    clamped,
    finite_sum,
    noise_check,
    numeric_records,
)
from dpkit_central._validation import MAX_FINITE
from dpkit_central.accuracy import Accuracy, check_alpha, mode_of
from dpkit_central.gaussian import (
    analytic_gaussian_sigma,
    gaussian_noise_for,
    lattice_gaussian_release,
)
from dpkit_central.intervals import MeanInterval
from dpkit_central.laplace import Laplace
from dpkit_central.records import VALUE, numeric_value
from dpkit_central.statistic import (
    Contribution,
    Released,
    fixed_point_step,
    noisy,
    per_group,
)

__all__ = ["Mean", "mean_accuracy"]


@attrs.frozen
class Mean(Query):
    """The mean of values clamped to [lower, upper], as a noisy centred sum over a noisy count.

    With m = (L + U)/2: S = Σ(clamp(x) − m) has Δ = (U − L)/2 and C = n has Δ = 1 under
    add/remove, so the release is mean = clamp(m + S̃ / max(C̃, 1), L, U) (see the module
    docstring for the sources).

    Budget: with Laplace noise S and C each get ε/2 (basic composition, Dwork & Roth 2014,
    Theorem 3.14), and the event says so: CompositeDP((LaplaceDP(ε/2), LaplaceDP(ε/2))), two
    Laplace releases that accountants compose as such (ε in total under basic composition,
    less under zCDP or a privacy-loss distribution). With Gaussian noise both parts get noise
    multiplier √2·z, where z = σ/Δ is the analytic calibration at (ε, δ): releasing
    (S, C) is one Gaussian mechanism whose normalised L2 sensitivity is
    √((1/(√2 z))² + (1/(√2 z))²) = 1/z, so the event is exactly GaussianDP(z, δ).
    The ratio is biased for small n; its variance has no closed form, so ``variance`` is None,
    while ``parts`` carries the two noisy components with their exact noise variances.
    """

    name: ClassVar[str] = "mean"
    lower: float = parameter(BOUND, doc="lower clamping bound")
    upper: float = parameter(BOUND, doc="upper clamping bound (> lower)")
    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(Choice(("laplace", "gaussian")), doc="noise", default="laplace")
    delta: float | None = parameter(
        DELTA,
        doc="δ, only for noise='gaussian'",
        default=None,
        optional=True,
        given_when=("noise", "gaussian"),
    )
    nan: str = parameter(NAN_POLICY, doc="missing values (NaN, None, text): 'drop'", default="drop")

    def __attrs_post_init__(self) -> None:
        bounds_check(self)
        noise_check(self)

    @property
    def midpoint(self) -> float:
        return 0.5 * (self.lower + self.upper)

    def parts(
        self, l1: float = 1.0, l2: float = 1.0, grid: float = 0.0
    ) -> tuple[Laplace | _FixedGaussian, Laplace | _FixedGaussian]:
        """The noise mechanisms of the centred sum and of the count.

        ``l1`` and ``l2`` scale both sensitivities: one record moves the centred sum by at
        most (U − L)/2 and the count by 1; under contribution bounds (G groups, R rows per
        group) the vectors of per-group sums and counts move by G·R times that in L1 and
        √G·R times that in L2 (:mod:`dpkit_central.tables`). ``grid``: a centred value is
        rounded to a multiple of it before summing (fixed point), which adds up to grid/2.
        """
        half_width = 0.5 * (self.upper - self.lower) + 0.5 * grid
        if self.noise == "laplace":
            return (
                Laplace(epsilon=self.epsilon / 2.0, sensitivity=l1 * half_width),
                Laplace(epsilon=self.epsilon / 2.0, sensitivity=l1),
            )
        assert self.delta is not None
        z = math.sqrt(2.0) * analytic_gaussian_sigma(self.epsilon, self.delta)
        return (
            _FixedGaussian(z * l2 * half_width, l2 * half_width, self.delta),
            _FixedGaussian(z * l2, l2, self.delta),
        )

    @property
    def privacy(self) -> PrivacyEvent:
        if self.noise == "laplace":
            half = LaplaceDP(epsilon=self.epsilon / 2.0)
            return CompositeDP((half, half))
        assert self.delta is not None
        return GaussianDP(
            noise_multiplier=analytic_gaussian_sigma(self.epsilon, self.delta), delta=self.delta
        )

    def accuracy(self, alpha: float = 0.05, *, rng: Any = None) -> Accuracy:
        """The cost and the half-widths of the centred sum and of the count, each at level
        1 − α/2 (so both hold with probability ≥ 1 − α; :meth:`Accuracy.mean_error` turns
        them into a bound on the mean for n records). See :mod:`dpkit_central.accuracy`."""
        return mean_accuracy(self, self.parts(), check_alpha(alpha, self.name), rng)

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = resolve_rng(rng, owner=self.name)[0]
        values = numeric_records(data, self.name)
        centred = clamped(values, self.lower, self.upper)
        with np.errstate(over="ignore"):  # only for bounds near ±1.8e308; clamped just below
            centred -= self.midpoint
        sum_mech, count_mech = self.parts()
        noisy_sum = sum_mech.randomize(finite_sum(centred), rng=rng).item()
        noisy_count = count_mech.randomize(float(values.shape[0]), rng=rng).item()
        mean = self.midpoint + noisy_sum / max(noisy_count, 1.0)
        value = min(max(mean, self.lower), self.upper)
        parts = tuple(
            QueryResult(
                query=part,
                value=value,
                mechanism=mech.name,
                privacy=mech.privacy,
                noise_scale=noise.scale,
                variance=noise.variance,
                noise=noise,
            )
            for part, value, mech in (
                ("centred_sum", noisy_sum, sum_mech),
                ("count", noisy_count, count_mech),
            )
            for noise in (mech.noise_for(rng, 1),)
        )
        rule = MeanInterval(
            self.lower, self.upper, 0.0, sum_mech.noise_for(rng, 1), count_mech.noise_for(rng, 1)
        )
        return QueryResult(
            self.name,
            value,
            f"{self.noise} (sum and count)",
            self.privacy,
            parts=parts,
            interval=rule,
        )

    # -- the table face (TableStatistic) -------------------------------------------------------

    value_kinds: ClassVar[tuple[ColumnKind, ...]] = ("number", "boolean", "object")
    needs_column: ClassVar[bool] = True
    reads_labels: ClassVar[bool] = False
    content: ClassVar[str | None] = VALUE
    cell: ClassVar[str | None] = None

    def file_cells(self) -> tuple[str, tuple[str, ...]]:
        return "numbers", ()

    @property
    def step(self) -> float:
        """g: the centred rows are summed as integers (:func:`fixed_point_step` of (U − L)/2)."""
        return fixed_point_step(0.5 * (self.upper - self.lower))

    def table_check(self, column: str, kind: ColumnKind, dtype: Any) -> None:
        return None

    def table_value(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> tuple[Any, list[Any]]:
        """The value as float64 (NaN where missing: dropped)."""
        frame = numeric_value(nw, frame, column, kind)
        return frame, [~nw.col(VALUE).is_nan()]

    def table_cells(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> Any:
        """The centred value's fixed point k = ⌊(clamp(x) − m)/g + 1/2⌋."""
        value = nw.col(VALUE).clip(self.lower, self.upper) - self.midpoint
        fixed = (value / self.step + 0.5).floor().cast(nw.Int64)
        return frame.drop(column).with_columns(fixed.alias(VALUE))

    def table_aggregations(self, nw: Any) -> list[Any]:
        return [nw.col(VALUE).sum().alias("sum")]

    def table_collect(
        self, groups: int, group: NDArray[np.int64], table: Any, found: Mapping[str, NDArray[Any]]
    ) -> tuple[dict[str, NDArray[Any]], Any]:
        """Per group its rows and its centred sum (the exact integer sum, times g)."""
        total = per_group(groups, group, found["sum"]).astype(np.float64) * self.step
        return {"count": per_group(groups, group, found["count"]), "centred_sum": total}, None

    def table_noise(self, contribution: Contribution) -> tuple[Any, ...]:
        """The centred sum's and the count's mechanisms at Δ scaled by G·R (L1) or √G·R (L2),
        a centred row adding at most (U − L)/2 + g/2 (:meth:`parts`)."""
        return self.parts(contribution.l1, contribution.l2, self.step)

    def table_release(self, aggregates: Any, contribution: Contribution, rng: Any) -> Released:
        """Per group clamp(m + S̃/max(C̃, 1), L, U), with both noisy parts."""
        changed = contribution.groups
        sum_mech, count_mech = self.parts(contribution.l1, contribution.l2, self.step)
        values = aggregates.values
        noisy_sum = noisy(sum_mech, values["centred_sum"], rng, changed)
        noisy_count = noisy(count_mech, values["count"].astype(np.float64), rng, changed)
        mean = self.midpoint + noisy_sum / np.maximum(noisy_count, 1.0)
        sum_noise, count_noise = (
            sum_mech.noise_for(rng, changed),
            count_mech.noise_for(rng, changed),
        )
        parts = (("centred_sum", noisy_sum, sum_noise), ("count", noisy_count, count_noise))
        clipped = np.clip(mean, self.lower, self.upper)
        rule = MeanInterval(self.lower, self.upper, self.step, sum_noise, count_noise)
        # Named by the noise actually added (discrete on a lattice in secure mode), as the
        # plan names it.
        kinds = "/".join(sorted({sum_noise.kind, count_noise.kind}))
        return Released(clipped, f"{kinds} (sum and count)", None, parts, interval=rule)

    def table_accuracy(self, contribution: Contribution, alpha: float, rng: Any) -> Accuracy:
        parts = self.parts(contribution.l1, contribution.l2, self.step)
        return mean_accuracy(self, parts, alpha, rng, contribution.groups)


def mean_accuracy(
    mean: Mean,
    parts: tuple[Laplace | _FixedGaussian, Laplace | _FixedGaussian],
    alpha: float,
    rng: Any,
    changed: int = 1,
) -> Accuracy:
    """The accuracy of a mean released from ``parts`` (centred sum, count), each part at
    level 1 − α/2 (a union bound: both hold together with probability ≥ 1 − α)."""
    level = 1.0 - alpha / 2.0
    named = []
    for part, mech in zip(("centred_sum", "count"), parts, strict=True):
        noise = mech.noise_for(mode_of(rng), changed)
        named.append((part, Accuracy(part, mech.privacy, level, noise, noise.half_width(level))))
    return Accuracy(
        mean.name,
        mean.privacy,
        1.0 - alpha,
        parts=tuple(named),
        half_range=0.5 * (mean.upper - mean.lower),
    )


@attrs.frozen
class _FixedGaussian:
    """Gaussian noise of a given σ (a component of a jointly calibrated Gaussian release)."""

    sigma: float
    sensitivity: float
    delta: float
    name: ClassVar[str] = "gaussian"

    @property
    def scale(self) -> float:
        return self.sigma

    @property
    def variance(self) -> float:
        return self.sigma * self.sigma  # inf, not OverflowError, for a huge σ

    @property
    def privacy(self) -> GaussianDP:
        """This component alone; the mean's event is the joint one (see Mean.privacy)."""
        return GaussianDP(noise_multiplier=self.sigma / self.sensitivity, delta=self.delta)

    def noise_for(self, rng: Any, coordinates: int = 1) -> AdditiveNoise:
        """The noise :meth:`randomize` adds in the mode of ``rng`` (see ``Gaussian.noise_for``)."""
        return gaussian_noise_for(self.sigma, self.sensitivity, rng, coordinates)

    def randomize(
        self, value: Any, /, *, rng: Any = None, changed: int | None = None
    ) -> NDArray[np.float64]:
        """value + N(0, σ²) (elementwise); in secure mode on the lattice of
        :func:`lattice_gaussian_release` (with the same declared noise multiplier σ/Δ, so the
        joint event is unchanged; ``changed`` as there)."""
        answers = np.asarray(value, dtype=np.float64)
        if isinstance(rng, SecureRandom):
            return lattice_gaussian_release(
                answers,
                sigma=self.sigma,
                sensitivity=self.sensitivity,
                rng=rng,
                owner="mean",
                changed=changed,
            )
        with np.errstate(over="ignore"):
            noisy = answers + rng.normal(0.0, self.sigma, size=answers.shape)
        # An overflow to ±inf is clipped back to the doubles (post-processing).
        return np.asarray(np.clip(noisy, -MAX_FINITE, MAX_FINITE), dtype=np.float64)
