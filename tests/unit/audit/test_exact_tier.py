"""The exact tier on declared densities: quadrature with a bounded error, normalisation errors
that name the sum, hockey-stick δ(ε) for (ε, δ) claims. Deterministic: no sampling.

Every expected value is computed independently of the auditor: piecewise-constant densities
are integrated exactly segment by segment between their breakpoints (in rationals where the
breakpoints allow), Gaussian δ(ε) from Balle & Wang's closed form with scipy.stats.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import pytest
from scipy import stats
from support import audit_catalog as catalog

import dpkit
from dpkit.testing import exact_check
from dpkit.testing.exact import NORMALISATION_TOLERANCE, integral

REGISTRY = catalog.catalog_registry()


def _piecewise_delta(
    log_pdf: Any, x: float, y: float, epsilon: float, breaks: list[float]
) -> float:
    """∫ max(0, p_x − e^ε p_y) for piecewise-constant densities: exact on each segment."""
    edges = np.unique(np.asarray(breaks, dtype=np.float64))
    mids = (edges[1:] + edges[:-1]) / 2
    p = np.exp(log_pdf(mids, np.full(len(mids), x)))
    q = np.exp(log_pdf(mids, np.full(len(mids), y)))
    return float(np.sum(np.maximum(0.0, p - math.exp(epsilon) * q) * np.diff(edges)))


def _square_wave_breaks(mechanism: Any, x: float, y: float) -> list[float]:
    _, _, b = mechanism._pqb()
    return [-b, 1 + b, x - b, x + b, y - b, y + b]


def _piecewise_breaks(mechanism: Any, x: float, y: float) -> list[float]:
    lx, rx, c, _ = mechanism._shape(x)
    ly, ry, _, _ = mechanism._shape(y)
    return [-c, c, float(lx), float(rx), float(ly), float(ry)]


@pytest.mark.parametrize(
    ("name", "params", "breaks"),
    [
        ("cat_square_wave", {"factor": 2.0}, _square_wave_breaks),
        ("cat_piecewise", {"centre_unhalved": True}, _piecewise_breaks),
    ],
)
def test_hockey_stick_of_discontinuous_densities_matches_the_exact_integral(
    name: str, params: dict[str, Any], breaks: Any
) -> None:
    mechanism = REGISTRY.mechanism(name, epsilon=1.0, **params)
    result = exact_check(mechanism)
    worst = max(
        _piecewise_delta(mechanism.log_probability, a, b, 1.0, breaks(mechanism, a, b))
        for a, b in mechanism.domain.pairs()
    )
    assert result.violation and worst > 0.1
    assert result.delta == pytest.approx(worst, abs=1e-4)


def test_the_quadrature_error_bound_covers_jumps_and_smooth_parts() -> None:
    """The bound is at least the true error, for a step (exact integral known) and a Gaussian."""
    points = np.linspace(-3.0, 3.0, 20_001)
    weights = np.full(len(points), points[1] - points[0])
    weights[[0, -1]] /= 2
    for jump_at in (0.00123, 0.7777, -1.41):
        step = np.where(points < jump_at, 0.2, 0.05)
        exact = 0.2 * (jump_at + 3) + 0.05 * (3 - jump_at)
        total, bound = integral(step, weights, lattice=False)
        assert abs(total - exact) <= bound + 1e-15
        assert bound < 1e-3
    smooth = stats.norm.pdf(points, scale=0.3)
    total, bound = integral(smooth, weights, lattice=False)
    truth = stats.norm.cdf(3, scale=0.3) - stats.norm.cdf(-3, scale=0.3)
    assert abs(total - truth) <= bound and bound < 1e-6


def test_interval_gaussian_delta_matches_balle_and_wang() -> None:
    """δ(ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) (Balle & Wang 2018, Theorem 8), Δ = 1."""
    for epsilon, violates in ((10.0, True), (0.5, False)):
        mechanism = REGISTRY.mechanism("cat_interval_gaussian", epsilon=epsilon)
        sigma = catalog.classic_sigma(epsilon, 1e-5)
        expected = stats.norm.cdf(0.5 / sigma - epsilon * sigma) - math.exp(
            epsilon
        ) * stats.norm.cdf(-0.5 / sigma - epsilon * sigma)
        result = exact_check(mechanism)
        assert result.delta == pytest.approx(expected, rel=1e-4)
        assert result.violation is violates


@attrs.frozen
class Scaled(dpkit.plugin.Mechanism):
    """A Laplace density on an interval input, declared with a wrong constant ``mass``."""

    name: ClassVar[str] = "scaled"
    kind: ClassVar[Literal["local", "central"]] = "local"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    mass: float = 1.0
    scale: float = 1.0

    @property
    def domain(self) -> dpkit.plugin.Interval:
        return dpkit.plugin.Interval(0.0, 1.0)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=1.0 / self.scale)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        x = np.asarray(values, dtype=np.float64)
        return x + rng.laplace(0.0, self.scale, size=x.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        gap = np.abs(np.asarray(outputs, float) - np.asarray(inputs, float))
        return -gap / self.scale - math.log(2 * self.scale) + math.log(self.mass)


def test_a_density_that_does_not_integrate_to_one_is_named() -> None:
    result = exact_check(Scaled(mass=1.01))
    assert result.violation and result.total == pytest.approx(1.01, rel=1e-6)
    assert "integrates to 1.01, not 1" in result.reason and math.isnan(result.epsilon)
    assert not exact_check(Scaled(mass=1 + NORMALISATION_TOLERANCE / 10)).violation


def test_a_density_narrower_than_the_grid_is_unchecked_not_accused() -> None:
    result = exact_check(Scaled(scale=1e-7))
    assert not result.checked and "narrower than the integration grid" in result.reason


@attrs.frozen
class HalfPmf(dpkit.plugin.Mechanism):
    """Randomized response whose declared pmf is p for the truth and p for the lie too."""

    name: ClassVar[str] = "half_pmf"
    kind: ClassVar[Literal["local", "central"]] = "local"

    @property
    def domain(self) -> dpkit.plugin.CategoricalDomain:
        return dpkit.plugin.CategoricalDomain(2)

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=1.0)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> Any:
        return np.asarray(values)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        return np.full(np.broadcast(np.asarray(outputs), np.asarray(inputs)).shape, math.log(0.3))

    def output_space(self) -> Any:
        return np.arange(2)


def test_a_pmf_that_sums_to_less_is_named_not_infinite() -> None:
    result = exact_check(HalfPmf())
    assert result.violation and result.total == pytest.approx(0.6)
    assert "the declared pmf of input 0 sums to 0.6, not 1" in result.reason
    assert result.to_dict()["epsilon"] is None and result.to_dict()["delta"] is None
    json.dumps(result.to_dict(), allow_nan=False)  # strict JSON: no NaN
