"""The Laplace mechanism (``laplace``)."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit import LaplaceDP, Mechanism, Real, VectorDomain, parameter
from dpkit_central._validation import as_finite, require_generator

__all__ = ["Laplace"]

POSITIVE = Real(low=0.0, low_open=True)


@attrs.frozen
class Laplace(Mechanism):
    """Add Laplace noise of scale b = Δ₁/ε to each query answer.

    Dwork, McSherry, Nissim & Smith 2006 ("Calibrating Noise to Sensitivity in Private Data
    Analysis"), Section 3; Dwork & Roth 2014, Definition 3.3 and Theorem 3.6:

        M(D) = f(D) + (Y₁, …, Y_k),   Y_i iid with density Lap(y | b) = exp(−|y|/b) / (2b),

    is ε-DP when ``sensitivity`` is the L1 sensitivity Δ₁ = max ‖f(D) − f(D′)‖₁ of the whole
    answer vector over neighbouring datasets. ``randomize`` treats every element of its input as
    one coordinate of that vector (noise is independent per element), so Δ₁ must bound the L1
    change of *all* the answers released together, not of one of them.

    The sampler is numpy's floating-point Laplace draw: fast, seedable, and not hardened against
    floating-point attacks (Mironov 2012); see issue 8 for the secure samplers.
    """

    name: ClassVar[str] = "laplace"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"

    epsilon: float = parameter(POSITIVE, doc="privacy loss ε", typical=(0.05, 6.0))
    sensitivity: float = parameter(
        POSITIVE, doc="L1 sensitivity Δ₁ of the answer vector", default=1.0, typical=(0.1, 10.0)
    )

    @property
    def scale(self) -> float:
        """The noise scale b = Δ₁/ε (standard deviation √2·b)."""
        return self.sensitivity / self.epsilon

    @property
    def variance(self) -> float:
        """Variance 2b² of the noise added to each answer."""
        return 2.0 * self.scale**2

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(self.sensitivity, norm=1.0)

    @property
    def privacy(self) -> LaplaceDP:
        return LaplaceDP(epsilon=self.epsilon)

    def randomize(self, values: Any, /, *, rng: Any = None) -> NDArray[np.float64]:
        """``values`` (finite reals, any shape) plus iid Lap(Δ₁/ε) noise, as float64."""
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        require_generator(rng, owner=self.name)
        answers = as_finite(values, owner=self.name)
        noise = np.asarray(rng.laplace(0.0, self.scale, size=answers.shape), dtype=np.float64)
        noise += answers
        return noise

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        """Elementwise log-density −|y − x|/b − ln(2b) (broadcasting).

        The log-density of a whole released vector is the sum over its elements.
        """
        y = np.asarray(outputs, dtype=np.float64)
        x = np.asarray(inputs, dtype=np.float64)
        b = self.scale
        return np.asarray(-np.abs(y - x) / b - math.log(2.0 * b), dtype=np.float64)
