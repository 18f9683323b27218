"""The geometric mechanism (``geometric``), a.k.a. the discrete Laplace mechanism."""

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
    InvalidParameter,
    Mechanism,
    PureDP,
    Real,
    VectorDomain,
    array_library,
    density_log_probability,
    geometric_noise,
    parameter,
    resolve_rng,
)
from dpkit_central._noise import AdditiveNoise, larger_reading, smaller_reading
from dpkit_central._validation import as_integers, check_integer_answers, integer_answers

__all__ = ["Geometric"]

POSITIVE = Real(low=0.0, low_open=True)
#: The largest noise scale Δ/ε: draws stay far inside int64 (|Z| ≥ 2⁶² with probability
#: e^(−2¹⁰)), and numpy's geometric draws (fast mode) do not saturate.
MAX_SCALE = 2.0**52


@attrs.frozen
class Geometric(Mechanism):
    """Add two-sided geometric (discrete Laplace) noise to integer answers.

    Ghosh, Roughgarden & Sundararajan 2009 ("Universally Utility-Maximizing Privacy
    Mechanisms", STOC), Definition 2.1: with α = e^(−ε/Δ₁),

        P[Z = k] = (1 − α)/(1 + α) · α^|k|,   k ∈ ℤ,

    so P[x + Z = y] / P[x′ + Z = y] = α^(|y−x| − |y−x′|) ≤ α^(−|x−x′|) ≤ e^ε whenever the
    integer answers differ by at most Δ₁ in L1: ε-DP. Noise is independent per element and
    ``sensitivity`` bounds the L1 change of all the answers together.

    Sampling: Z = G₁ − G₂ with G₁, G₂ iid geometric on {0, 1, …} with success probability
    1 − α (P[G = g] = (1 − α)α^g) has exactly this law (Inusah & Kozubowski 2006, "A discrete
    analogue of the Laplace distribution", J. Stat. Plan. Inference 136(3), Section 2; in one
    line: P[G₁ − G₂ = k] = Σ_g (1−α)²α^(g+k)α^g = (1−α)²α^k/(1−α²) for k ≥ 0). numpy's
    ``geometric`` counts trials (support {1, 2, …}); the shift cancels in the difference.
    That is the fast mode (a numpy Generator, floating-point inside numpy's geometric draw;
    its uniforms cannot represent probabilities below about 2⁻⁵³, so for ε/Δ₁ beyond ~36 the
    noise is 0 in practice and the release is not ε-DP in the strict sense).
    Given dpkit's secure generator, the noise comes from the exact discrete-Laplace sampler of
    :func:`dpkit.randomness.discrete_laplace` (Canonne, Kamath & Steinke 2020, Algorithm 2)
    at scale Δ₁/ε rounded up.

    **In a session** (``docs/security.md``): ``check_input`` accepts arrays of integers —
    integer and boolean dtypes, and Python values (a list) — and refuses float arrays before
    the spend: no rounding of real answers keeps an L1 sensitivity, so the integers must be the
    caller's. ``coerce`` keeps integers exactly, clamped to |k| ≤ 2⁶²; a Python value outside
    the integers is rounded down (NaN and non-numbers → 0, ±inf → ±2⁶²;
    :func:`~dpkit_central._validation.integer_answers`), a data-independent map per coordinate;
    a vector answer is one release (``releases`` = 1).
    """

    name: ClassVar[str] = "geometric"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "discrete"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    sensitivity: float = parameter(
        SENSITIVITY, doc="L1 sensitivity Δ₁ of the integer answers", default=1.0, typical=(1.0, 5.0)
    )

    def __attrs_post_init__(self) -> None:
        if self.sensitivity / self.epsilon > MAX_SCALE:
            raise InvalidParameter(
                "sensitivity",
                self.sensitivity,
                f"at most {MAX_SCALE:g}·ε (the noise scale Δ/ε; larger noise overflows the "
                "int64 answers, and fast mode's draws saturate to no noise at all)",
                owner=self.name,
            )

    @property
    def secure_scale(self) -> Fraction:
        """The scale the exact sampler draws at: Δ/ε, with Δ at its larger reading and ε at
        its smaller (binary value or shortest decimal, the ledger's: :func:`smaller_reading`),
        in exact rationals, rounded *up* (so the realised ε never exceeds what is charged) to
        a rational the sampler takes — numerator and denominator at most 2⁶², and at least 2⁻²⁰
        (beyond ε/Δ = 2²⁰ the noise is 0 but with probability 2e^(−2²⁰) either way)."""
        exact = larger_reading(self.sensitivity) / smaller_reading(self.epsilon)
        if exact.denominator > 1 << 62 or exact.numerator > 1 << 62:
            # the finest grid 2⁻ᵏ whose numerators stay within 2⁶² (scales are below 2⁶¹)
            bits = 62 - max(0, math.ceil(exact).bit_length())
            exact = Fraction(math.ceil(exact * (1 << bits)), 1 << bits)
        return max(exact, Fraction(1, 1 << 20))

    @property
    def alpha(self) -> float:
        """α = e^(−ε/Δ₁), the ratio of consecutive probabilities."""
        return math.exp(-self.epsilon / self.sensitivity)

    @property
    def variance(self) -> float:
        """Var Z = 2α/(1 − α)²: twice the variance α/(1 − α)² of one geometric on {0, 1, …}."""
        a = self.alpha
        return 2.0 * a / (-math.expm1(-self.epsilon / self.sensitivity)) ** 2

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(self.sensitivity, norm=1.0, integer=True)

    def noise_for(self, rng: Any, coordinates: int) -> AdditiveNoise:
        """The noise added, the same in both modes: a two-sided geometric of scale Δ₁/ε."""
        return AdditiveNoise.geometric(self.sensitivity / self.epsilon)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    def check_input(self, values: Any, /) -> None:
        """Public phase: an array of integers, any shape (dtype kind only, never values)."""
        check_integer_answers(values, owner=self.name)

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[np.int64]:
        """Private phase: integers kept (clamped to ±2⁶²), other Python values rounded down
        (NaN → 0); never raises."""
        return integer_answers(values)

    def randomize(self, values: Any, /, *, rng: Any = None) -> Any:
        """``values`` (integers, any shape) plus iid two-sided geometric noise, as int64.

        An accelerator's array (a CUDA tensor, a CuPy array) is released there, int64 on its
        device: the exact sampler of secure mode in both modes (:mod:`dpkit.tensors.noise`; in
        secure mode the host's law word for word); ``rng`` may then also be a
        ``torch.Generator`` (fast mode).
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return geometric_noise(
                library, values, scale=self.secure_scale, rng=rng, owner=self.name
            )
        rng = resolve_rng(rng, owner=self.name)[0]
        answers = as_integers(values, owner=self.name)
        if not isinstance(rng, np.random.Generator):  # secure mode: the exact sampler
            from dpkit.plugin import discrete_laplace

            noise = np.asarray(
                discrete_laplace(self.secure_scale, size=answers.shape, rng=rng), np.int64
            )
            return np.asarray(noise + answers, dtype=np.int64)
        p = -math.expm1(-self.epsilon / self.sensitivity)  # 1 − α, accurate for small ε/Δ
        noise = rng.geometric(p, size=answers.shape).astype(np.int64, copy=False)
        noise -= rng.geometric(p, size=answers.shape)
        noise += answers
        return np.asarray(noise, dtype=np.int64)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """Elementwise log P[y | x] = ln((1 − α)/(1 + α)) − (ε/Δ₁)|y − x|; −inf off the integers.

        An accelerator's array (either operand) is scored on its device, float64, in its type,
        by the same formula in its namespace (:mod:`dpkit.tensors.log_probability`: a numpy or
        list operand beside it is copied there).
        """
        return density_log_probability(outputs, inputs, self._log_density, owner=self.name)

    def _log_density(self, xp: Any, y: Any, x: Any) -> Any:
        """The log-pmf of float64 arrays of the namespace ``xp`` (numpy's on the host)."""
        rate = self.epsilon / self.sensitivity
        log_norm = math.log(-math.expm1(-rate)) - math.log1p(math.exp(-rate))
        distance = xp.abs(y - x)
        integral = (y == xp.round(y)) & (x == xp.round(x))
        return xp.where(integral, log_norm - rate * distance, -math.inf)
