"""The Gaussian mechanism (``gaussian``), with the classic and the analytic calibration."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit import Choice, GaussianDP, InvalidParameter, Mechanism, Real, VectorDomain, parameter
from dpkit.privacy import gaussian_delta
from dpkit_central._validation import as_finite, require_generator

__all__ = ["Gaussian", "analytic_gaussian_sigma", "classic_gaussian_sigma"]

POSITIVE = Real(low=0.0, low_open=True)
OPEN_UNIT = Real(low=0.0, high=1.0, low_open=True, high_open=True)
_OWNER = "gaussian"


def _check(name: str, value: float, ok: bool, allowed: str, owner: str) -> None:
    if not ok:
        raise InvalidParameter(name, value, allowed, owner=owner)


def _check_common(epsilon: float, delta: float, sensitivity: float, owner: str) -> None:
    _check("epsilon", epsilon, math.isfinite(epsilon) and epsilon > 0, "a finite real > 0", owner)
    _check("delta", delta, 0.0 < delta < 1.0, "a real number in the open interval (0, 1)", owner)
    _check(
        "sensitivity",
        sensitivity,
        math.isfinite(sensitivity) and sensitivity > 0,
        "a finite real > 0",
        owner,
    )


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """σ = Δ₂·√(2 ln(1.25/δ))/ε, valid only for ε < 1.

    Dwork & Roth 2014, Theorem A.1 (the proof needs ε < 1; for ε ≥ 1 the formula can fail to
    give (ε, δ)-DP, so it is refused: use :func:`analytic_gaussian_sigma`).
    """
    _check_common(epsilon, delta, sensitivity, _OWNER)
    _check(
        "epsilon",
        epsilon,
        epsilon < 1.0,
        "< 1 for calibration='classic' (Dwork & Roth Theorem A.1 needs ε < 1); "
        "use calibration='analytic' for ε >= 1",
        _OWNER,
    )
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest σ for which Gaussian noise N(0, σ²) gives (ε, δ)-DP at L2 sensitivity Δ₂.

    Balle & Wang 2018 ("Improving the Gaussian Mechanism for Differential Privacy: Analytical
    Calibration and Optimal Denoising", ICML), Theorem 8: the mechanism is (ε, δ)-DP iff

        δ(ε; σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ,

    and δ(ε; σ) decreases in σ, so the calibrated σ is its root. Instead of the paper's
    Algorithm 1 (a search over its B± parameterisation) the root is found by bisection on
    ln(σ/Δ) over a bracket grown by doubling, until the bracket is one part in 10¹⁴, and the
    upper end is returned, so δ(ε; σ) ≤ δ always holds for the returned σ (Φ is evaluated
    with ``erfc``, accurate in both tails; see :func:`dpkit.privacy.gaussian_delta`).
    """
    _check_common(epsilon, delta, sensitivity, _OWNER)
    # gaussian_delta works in units of the noise multiplier σ/Δ.
    start = math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    lo, hi = start, start
    while gaussian_delta(epsilon, lo) <= delta:
        lo /= 2.0
    while gaussian_delta(epsilon, hi) > delta:
        hi *= 2.0
    log_lo, log_hi = math.log(lo), math.log(hi)
    for _ in range(200):
        if log_hi - log_lo <= 1e-14:
            break
        mid = 0.5 * (log_lo + log_hi)
        if gaussian_delta(epsilon, math.exp(mid)) > delta:
            log_lo = mid
        else:
            log_hi = mid
    return sensitivity * math.exp(log_hi)


@attrs.frozen
class Gaussian(Mechanism):
    """Add N(0, σ²) noise to each query answer, σ calibrated to (ε, δ) and the L2 sensitivity.

    ``calibration="analytic"`` (the default) uses the exact privacy curve of Balle & Wang 2018
    (:func:`analytic_gaussian_sigma`), the smallest σ that is (ε, δ)-DP, valid for every ε > 0;
    ``"classic"`` uses σ = Δ₂·√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Theorem A.1), which is
    refused for ε >= 1. ``sensitivity`` is the L2 sensitivity Δ₂ of the whole answer vector
    (noise is independent per element of the input).

    Its accounting event is :class:`dpkit.GaussianDP` with noise multiplier σ/Δ₂, so the
    accountant composes it as a Gaussian (zCDP ρ = Δ₂²/(2σ²), Bun & Steinke 2016, Prop. 1.6),
    not as a generic (ε, δ) pair. The sampler is numpy's floating-point normal draw (not
    hardened against floating-point attacks).
    """

    name: ClassVar[str] = "gaussian"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"

    epsilon: float = parameter(POSITIVE, doc="privacy loss ε", typical=(0.05, 6.0))
    delta: float = parameter(OPEN_UNIT, doc="failure probability δ in (0, 1)", typical=(1e-8, 1e-4))
    sensitivity: float = parameter(
        POSITIVE, doc="L2 sensitivity Δ₂ of the answer vector", default=1.0, typical=(0.1, 10.0)
    )
    calibration: str = parameter(
        Choice(("analytic", "classic")),
        doc="how σ is chosen: 'analytic' (Balle & Wang 2018) or 'classic' (ε < 1 only)",
        default="analytic",
    )
    sigma: float = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if self.calibration == "classic":
            if self.epsilon >= 1.0:
                raise InvalidParameter(
                    "epsilon",
                    self.epsilon,
                    "< 1 for calibration='classic' (Dwork & Roth Theorem A.1 needs ε < 1); "
                    "use calibration='analytic' for ε >= 1",
                    owner=self.name,
                )
            sigma = classic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)
        else:
            sigma = analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)
        object.__setattr__(self, "sigma", sigma)

    @property
    def scale(self) -> float:
        """The noise standard deviation σ (same as ``sigma``)."""
        return self.sigma

    @property
    def variance(self) -> float:
        """Variance σ² of the noise added to each answer."""
        return self.sigma**2

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(self.sensitivity, norm=2.0)

    @property
    def privacy(self) -> GaussianDP:
        return GaussianDP(noise_multiplier=self.sigma / self.sensitivity, delta=self.delta)

    def randomize(self, values: Any, /, *, rng: Any = None) -> NDArray[np.float64]:
        """``values`` (finite reals, any shape) plus iid N(0, σ²) noise, as float64."""
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        require_generator(rng, owner=self.name)
        answers = as_finite(values, owner=self.name)
        noise = np.asarray(rng.normal(0.0, self.sigma, size=answers.shape), dtype=np.float64)
        noise += answers
        return noise

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        """Elementwise log-density −(y − x)²/(2σ²) − ln(σ√(2π)) (broadcasting)."""
        y = np.asarray(outputs, dtype=np.float64)
        x = np.asarray(inputs, dtype=np.float64)
        s = self.sigma
        return np.asarray(
            -0.5 * ((y - x) / s) ** 2 - math.log(s) - 0.5 * math.log(2.0 * math.pi),
            dtype=np.float64,
        )
