"""The Laplace mechanism (``laplace``)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    CENTRAL_EPSILON,
    SENSITIVITY,
    LaplaceDP,
    Mechanism,
    Real,
    SecureRandom,
    VectorDomain,
    array_library,
    density_log_probability,
    discrete_laplace,
    laplace_noise,
    parameter,
    resolve_rng,
)
from dpkit_central._noise import AdditiveNoise, larger_reading, smaller_reading
from dpkit_central._validation import (
    LATTICE_LIMIT,
    MAX_FINITE,
    as_finite,
    check_answers,
    exact_answers,
    lattice_release,
    lattice_steps,
    require_generator,
)

__all__ = ["Laplace"]

POSITIVE = Real(low=0.0, low_open=True)
#: Secure-mode outputs lie on multiples of 2^(⌈log₂ b⌉ − LATTICE_BITS).
LATTICE_BITS = 30


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

    **Fast mode** (a numpy Generator) adds numpy's floating-point Laplace draw: seedable, and
    *not* safe against floating-point attacks (Mironov 2012: the low bits of x + noise reveal x).

    **Secure mode** (``rng=None`` or a SecureRandom) releases on a lattice instead, the pattern
    of Google's and OpenDP's libraries: with g = 2^(⌈log₂ b⌉ − 30), each answer is rounded to
    k = round(x/g) and the release is g·(k + Z), Z exact discrete Laplace with
    P[Z = z] ∝ exp(−|z|/t) (Canonne, Kamath & Steinke 2020, Algorithm 2). Rounding moves each
    coordinate by less than one lattice step, so ‖k − k′‖₁ ≤ Δ₁/g + d for d released
    coordinates, and t = (Δ₁/g + d)/ε, rounded up to a multiple of 2⁻¹⁶, keeps ε exactly
    (ratio ≤ exp(‖k − k′‖₁/t)). The noise is larger than b by the factor 1 + d·g/Δ₁ ≈ 1 + d·2⁻³⁰.
    The integer k + Z is exact (int64, answers up to about 2³²·b); converting it to a float is
    post-processing of that integer, so it cannot leak.
    Every output is a multiple of g whatever the input, so no low bit depends on the data.
    Lattice indices are clamped to ±(2⁶¹ − 1) (:func:`~dpkit_central._validation.lattice_steps`:
    a 1-Lipschitz map per coordinate, so Δ₁ is kept), so no answer is too large.

    **In a session** (``docs/security.md``): ``check_input`` accepts any array of real numbers
    (booleans and object arrays too) and refuses text or dates before the spend; ``coerce``
    maps every answer into the finite reals, NaN → 0 and ±inf → ± the largest double, a
    fraction or decimal that no double holds kept exact for the lattice
    (:func:`~dpkit_central._validation.exact_answers`); a vector answer is one release of a
    vector query whose L1 sensitivity is Δ₁ (``releases`` = 1).
    """

    name: ClassVar[str] = "laplace"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    sensitivity: float = parameter(
        SENSITIVITY, doc="L1 sensitivity Δ₁ of the answer vector", default=1.0, typical=(0.1, 10.0)
    )

    @property
    def scale(self) -> float:
        """The noise scale b = Δ₁/ε (standard deviation √2·b) of fast mode; secure mode adds
        slightly more (:meth:`noise_for`)."""
        return self.sensitivity / self.epsilon

    @property
    def variance(self) -> float:
        """Variance 2b² of the noise added in fast mode (secure mode: :meth:`noise_for`)."""
        return 2.0 * self.scale * self.scale  # inf, not OverflowError, for a huge b

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(self.sensitivity, norm=1.0)

    @property
    def privacy(self) -> LaplaceDP:
        return LaplaceDP(epsilon=self.epsilon)

    def check_input(self, values: Any, /) -> None:
        """Public phase: an array of real numbers, any shape (dtype kind only, never values)."""
        check_answers(values, owner=self.name)

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[Any]:
        """Private phase: NaN → 0, ±inf → ± the largest double, per answer, and answers no
        double holds kept exact (:func:`~dpkit_central._validation.exact_answers`); never
        raises."""
        return exact_answers(values)

    def randomize(self, values: Any, /, *, rng: Any = None, changed: int | None = None) -> Any:
        """``values`` (finite reals, any shape) plus iid Lap(Δ₁/ε) noise, as float64.

        In fast mode a sum beyond the largest double (answers near ±1.8e308) is clipped back to
        it instead of overflowing to ±inf (post-processing of the release). ``changed``: at
        most this many coordinates differ between neighbouring answer vectors (a grouped query:
        one id changes at most G groups); secure mode then covers the lattice rounding of those
        coordinates only (default: all of them), since an unchanged coordinate rounds the same
        way on both sides, so ‖k − k′‖₁ ≤ Δ₁/g + ``changed``.

        An accelerator's array (a CUDA tensor, a CuPy array) is released there, float64 on its
        device, with the same law in secure mode, word for word (:mod:`dpkit.tensors.noise`);
        ``rng`` may then also be a ``torch.Generator`` (fast mode).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            size = math.prod(int(d) for d in values.shape)
            return laplace_noise(
                library,
                values,
                scale=self.scale,
                step=self.lattice_step(),
                steps=self.lattice_scale(changed or size),
                limit=LATTICE_LIMIT,
                rng=rng,
                owner=self.name,
            )
        rng = resolve_rng(rng, owner=self.name)[0]
        answers = as_finite(values, owner=self.name)
        if isinstance(rng, SecureRandom):
            return self._lattice_release(answers, rng, changed or answers.size)
        require_generator(rng, owner=self.name)
        answers = np.asarray(answers, dtype=np.float64)  # exact answers: nearest doubles
        noise = np.asarray(rng.laplace(0.0, self.scale, size=answers.shape), dtype=np.float64)
        with np.errstate(over="ignore"):
            noise += answers
        return np.asarray(np.clip(noise, -MAX_FINITE, MAX_FINITE), dtype=np.float64)

    def lattice_step(self) -> float:
        """g = 2^(⌈log₂ b⌉ − 30): the spacing of secure-mode outputs."""
        return math.ldexp(1.0, math.ceil(math.log2(self.scale)) - LATTICE_BITS)

    def lattice_scale(self, coordinates: int = 1) -> Fraction:
        """t = (Δ₁/g + d)/ε rounded up to a multiple of 2⁻¹⁶: the secure-mode discrete Laplace
        scale, in lattice steps, for d = ``coordinates`` answers released together; ε at its
        smaller reading (never above what the ledger charges) and Δ₁ at its larger
        (:func:`dpkit_central._noise.smaller_reading`)."""
        g = self.lattice_step()
        steps = larger_reading(self.sensitivity) / Fraction(g) + max(coordinates, 1)
        exact = steps / smaller_reading(self.epsilon)
        return Fraction(math.ceil(exact * 2**16), 2**16)  # rounding up only adds privacy

    def noise_for(self, rng: Any, coordinates: int = 1) -> AdditiveNoise:
        """The noise :meth:`randomize` adds with this ``rng`` to each of ``coordinates`` answers.

        Fast mode (a numpy Generator): Lap(b). Secure mode (None or a SecureRandom): g·Z with Z
        discrete Laplace of scale t = :meth:`lattice_scale` steps, variance 2α/(1 − α)²·g²,
        α = e^(−1/t), which exceeds 2b² by the factor (1 + d·g/Δ₁)² or so (see the class
        docstring). Intervals built from it also cover the rounding to the lattice.
        """
        if rng is None or isinstance(rng, SecureRandom):
            return AdditiveNoise.discrete_laplace(
                float(self.lattice_scale(coordinates)), self.lattice_step()
            )
        return AdditiveNoise.laplace(self.scale)

    def _lattice_release(
        self, answers: NDArray[np.float64], rng: Any, coordinates: int
    ) -> NDArray[np.float64]:
        g = self.lattice_step()
        steps = lattice_steps(answers, g, owner=self.name, noise=f"noise scale {self.scale:.3g}")
        t = self.lattice_scale(coordinates)
        noise = np.asarray(discrete_laplace(t, size=answers.shape, rng=rng), dtype=np.int64)
        return lattice_release(steps, noise, g)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """Elementwise log-density −|y − x|/b − ln(2b) (broadcasting).

        The log-density of a whole released vector is the sum over its elements.

        An accelerator's array (either operand) is scored on its device, float64, in its type,
        by the same formula in its namespace (:mod:`dpkit.tensors.log_probability`: a numpy or
        list operand beside it is copied there).
        """
        return density_log_probability(outputs, inputs, self._log_density, owner=self.name)

    def _log_density(self, xp: Any, y: Any, x: Any) -> Any:
        """−|y − x|/b − ln(2b) of float64 arrays of the namespace ``xp`` (numpy's on the host)."""
        b = self.scale
        return -xp.abs(y - x) / b - math.log(2.0 * b)
