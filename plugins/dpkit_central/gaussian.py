"""The Gaussian mechanism (``gaussian``), with the classic and the analytic calibration."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    CENTRAL_EPSILON,
    DELTA,
    SENSITIVITY,
    Choice,
    GaussianDP,
    InvalidParameter,
    Mechanism,
    Real,
    SecureRandom,
    VectorDomain,
    array_library,
    density_log_probability,
    discrete_gaussian,
    gaussian_delta,
    gaussian_meets,
    gaussian_noise,
    parameter,
    resolve_rng,
)
from dpkit_central._noise import AdditiveNoise
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

__all__ = [
    "LATTICE_BITS",
    "SMOOTHING",
    "Gaussian",
    "LatticeGaussian",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "gaussian_noise_for",
    "gaussian_release",
    "lattice_gaussian_release",
]

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
    ln(σ/Δ) over a bracket grown by doubling, until the bracket is one part in 10¹⁴ (Φ
    evaluated with ``erfc``, accurate in both tails; see :func:`dpkit.privacy.gaussian_delta`).
    The σ returned is then checked on a rigorous enclosure of δ(ε; σ)
    (:func:`dpkit.privacy.gaussian_meets`, with σ as computed and Δ at its larger reading) and
    moved up until the check passes, so δ(ε; σ) ≤ δ holds for it exactly, not only in floats.
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
    sigma = sensitivity * math.exp(log_hi)
    reach = max(Fraction(sensitivity), Fraction(repr(sensitivity)))  # Δ at its larger reading
    step = 2.0**-40
    while not gaussian_meets(epsilon, delta, noise_multiplier=Fraction(sigma) / reach):
        sigma *= 1.0 + step  # the float curve fell a hair short: more noise, checked again
        step *= 2.0
    return sigma


#: Secure-mode outputs lie on multiples of g = 2^(⌈log₂ σ⌉ − LATTICE_BITS). 28 rather than the
#: lattice Laplace's 30 keeps σ_L below 2^28.5 steps, where the exact sampler's acceptance exponent
#: still fits in uint64 (about 4x faster than its Python-int path above that).
LATTICE_BITS = 28
#: τ, in lattice steps: the width of the smoothing kernel in the privacy argument of
#: :class:`LatticeGaussian` (τ² is added to the lattice variance; η(16) < 10⁻²¹⁹⁴).
SMOOTHING = 16


def _sqrt_upper(d: int) -> Fraction:
    """A rational upper bound on √d, within 2⁻³²."""
    scaled = d << 64
    root = math.isqrt(scaled)
    if root * root < scaled:
        root += 1
    return Fraction(root, 1 << 32)


def _ceil_log2(x: float) -> int:
    """⌈log₂ x⌉ for a finite x > 0, exactly (from the binary exponent, no ``log``)."""
    mantissa, exponent = math.frexp(x)
    return exponent - 1 if mantissa == 0.5 else exponent


@attrs.frozen
class LatticeGaussian:
    """The secure-mode release plan of a Gaussian mechanism: lattice step, sensitivity, variance.

    **Release.** With g = 2^(⌈log₂ σ⌉ − bits) (σ the continuous calibration, so σ/g ∈
    (2^(bits−1), 2^bits]), each of the d answers x_j is rounded to k_j = round(x_j/g) and the
    release is g·(k + Z), Z_j iid discrete Gaussian N_ℤ(0, σ_L²) (Canonne, Kamath & Steinke 2020,
    "The Discrete Gaussian for Differential Privacy", NeurIPS, Definition 1 and Algorithm 3).
    Every output is a multiple of g whatever the input.

    **Sensitivity on the lattice.** Rounding moves each coordinate by at most 1/2 step, so for
    neighbours (‖x − x′‖₂ ≤ Δ₂), by the triangle inequality
    ‖k − k′‖₂ ≤ ‖k − x/g‖₂ + ‖x − x′‖₂/g + ‖x′/g − k′‖₂ ≤ Δ₂/g + √d =: Δ_L
    (√d is bounded above by a rational within 2⁻³²). This is the L2 analogue of the lattice
    Laplace's Δ₁/g + d.

    **Variance.** σ_L² = ⌈z²·Δ_L² + τ²⌉ (an integer, computed exactly in rationals), where
    z = σ/Δ₂ is the noise multiplier the mechanism *declares* (its :class:`dpkit.GaussianDP`
    event) and τ = ``smoothing``. So σ_L² = σ′² + τ² with σ′ ≥ z·Δ_L.

    **Privacy.** (i) zCDP, exactly: the multivariate discrete Gaussian with integer shifts of L2
    norm ≤ Δ_L is Δ_L²/(2σ_L²)-zCDP (CKS20, Theorem 14), and Δ_L²/(2σ_L²) < 1/(2z²), the ρ
    that accountants charge for GaussianDP(z). (ii) The (ε, δ) profile (and the privacy-loss
    distribution used by the PLD accountant), by smoothing: let X = k + N(0, σ′²·I) (the
    continuous Gaussian mechanism on k, whose profile is that of noise multiplier σ′/Δ_L ≥ z, or
    better: Balle & Wang 2018, Theorem 8, the profile depends only on Δ/σ and improves as σ
    grows), and post-process each X_j by the kernel K(x, y) = e^(−(y−x)²/(2τ²))/θ_τ(x) on ℤ,
    θ_τ(x) = Σ_{m∈ℤ} e^(−(m−x)²/(2τ²)). By Poisson summation
    θ_τ(x) = τ√(2π)·(1 + Σ_{m≠0} e^(−2π²τ²m²) cos 2πmx), so θ_τ(x)/(τ√(2π)) ∈ [1 − η, 1 + η]
    with η = 2Σ_{m≥1} e^(−2π²τ²m²); if θ_τ were constant the output would be exactly
    ∝ e^(−(y−k)²/(2σ_L²)) (a Gaussian convolved with a Gaussian), and the normaliser of
    N_ℤ(0, σ_L²) is σ_L√(2π)·[1, 1 + η]. Hence the released pmf is, pointwise, e^(±a) times a
    post-processing of X, with a = d·ln((1 + η)/(1 − η)), and for every event S and ε ≥ 0
    P(S) − e^ε P′(S) ≤ e^a·δ_z(ε − 2a) ≤ δ_z(ε) + 4a·e^ε (δ_z has slope ≥ −e^ε in ε), where
    δ_z is the declared continuous curve. For τ = 16, η < 10⁻²¹⁹⁴ and, for any d < 2⁶³,
    a < 10⁻²¹⁷⁵: the discrete release meets the declared GaussianDP(z, δ) up to an additive
    10⁻²¹⁷⁰·e^ε in δ, far below anything a float can represent.

    **Cost.** The noise standard deviation is g·σ_L ≈ z·(Δ₂ + g√d), larger than σ by the
    factor 1 + √d·g/Δ₂ ≤ 1 + √d·z·2^(1−bits) (plus τ²/(2σ_L²) < 2⁻⁴⁶ relative); and the exact
    sampler runs at about 1.5–2 M samples/s at σ_L ≈ 2²⁸ (``bits`` = 28) against about
    60–90 M/s for numpy's float normal.
    """

    step: float
    sensitivity_steps: Fraction
    sigma2_steps: int

    @classmethod
    def plan(
        cls,
        sigma: float,
        sensitivity: float,
        coordinates: int,
        *,
        bits: int = LATTICE_BITS,
        smoothing: int = SMOOTHING,
    ) -> LatticeGaussian:
        """The plan for ``coordinates`` answers of L2 sensitivity Δ₂ = ``sensitivity``, σ = ``sigma``."""
        z = Fraction(sigma / sensitivity)  # exactly the float that GaussianDP declares
        step = math.ldexp(1.0, max(_ceil_log2(sigma) - bits, -1074))
        steps = Fraction(sensitivity) / Fraction(step) + _sqrt_upper(max(coordinates, 1))
        return cls(step, steps, math.ceil(z * z * steps * steps + smoothing * smoothing))

    @property
    def noise_std(self) -> float:
        """The standard deviation parameter g·σ_L of the noise, in the answers' units."""
        return self.step * math.sqrt(self.sigma2_steps)


def gaussian_noise_for(
    sigma: float, sensitivity: float, rng: Any, coordinates: int = 1
) -> AdditiveNoise:
    """The noise of a Gaussian release of σ = ``sigma`` in the mode of ``rng`` (see
    :meth:`Gaussian.noise_for`)."""
    if rng is None or isinstance(rng, SecureRandom):
        plan = LatticeGaussian.plan(sigma, sensitivity, coordinates)
        return AdditiveNoise.discrete_gaussian(plan.sigma2_steps, plan.step)
    return AdditiveNoise.gaussian(sigma)


def lattice_gaussian_release(
    answers: NDArray[np.float64],
    *,
    sigma: float,
    sensitivity: float,
    rng: Any,
    owner: str = _OWNER,
    bits: int = LATTICE_BITS,
    smoothing: int = SMOOTHING,
    changed: int | None = None,
) -> NDArray[np.float64]:
    """g·(round(x/g) + Z), Z iid N_ℤ(0, σ_L²): the secure Gaussian release (see :class:`LatticeGaussian`).

    The integer round(x/g) + Z is exact (int64); converting it to a float is post-processing of
    that integer, so no low bit depends on the data. round(x/g) is clamped to ±(2⁶¹ − 1)
    (:func:`~dpkit_central._validation.lattice_steps`), a 1-Lipschitz map per coordinate, so
    the lattice sensitivity Δ_L still holds and no answer is too large. ``changed``: at most
    this many coordinates differ between neighbouring answers (default: all); the rounding of
    an unchanged coordinate is the same on both sides, so Δ_L = Δ₂/g + √``changed``.
    """
    coordinates = changed or answers.size
    plan = LatticeGaussian.plan(sigma, sensitivity, coordinates, bits=bits, smoothing=smoothing)
    g = plan.step
    steps = lattice_steps(answers, g, owner=owner, noise=f"noise σ = {sigma:.3g}")
    noise = np.asarray(
        discrete_gaussian(plan.sigma2_steps, size=answers.shape, rng=rng), dtype=np.int64
    )
    return lattice_release(steps, noise, g)


def gaussian_release(
    values: Any,
    *,
    sigma: float,
    sensitivity: float,
    rng: Any,
    owner: str = _OWNER,
    changed: int | None = None,
) -> Any:
    """``values`` plus Gaussian noise of standard deviation σ = ``sigma`` for L2 sensitivity
    Δ₂ = ``sensitivity``: what :meth:`Gaussian.randomize` releases (its docstring), for a
    numpy array or an accelerator's array (released there, float64 on its device). Secure
    mode: the lattice release of :class:`LatticeGaussian` for ``changed`` (default: all)
    coordinates; fast mode: a float normal draw."""
    library = array_library(values, owner=owner)
    if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
        size = math.prod(int(d) for d in values.shape)
        plan = LatticeGaussian.plan(sigma, sensitivity, changed or size)
        return gaussian_noise(
            library,
            values,
            sigma=sigma,
            step=plan.step,
            sigma2_steps=plan.sigma2_steps,
            limit=LATTICE_LIMIT,
            rng=rng,
            owner=owner,
        )
    rng = resolve_rng(rng, owner=owner)[0]
    answers = as_finite(values, owner=owner)
    if isinstance(rng, SecureRandom):
        return lattice_gaussian_release(
            answers,
            sigma=sigma,
            sensitivity=sensitivity,
            rng=rng,
            owner=owner,
            changed=changed,
        )
    require_generator(rng, owner=owner)
    answers = np.asarray(answers, dtype=np.float64)  # exact answers: nearest doubles
    noise = np.asarray(rng.normal(0.0, sigma, size=answers.shape), dtype=np.float64)
    with np.errstate(over="ignore"):
        noise += answers
    return np.asarray(np.clip(noise, -MAX_FINITE, MAX_FINITE), dtype=np.float64)


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
    not as a generic (ε, δ) pair.

    **Fast mode** (a numpy Generator) adds numpy's floating-point normal draw: seedable, and
    not safe against floating-point attacks (Mironov 2012; Jin et al. 2022).

    **Secure mode** (``rng=None`` or a SecureRandom) releases on the lattice of multiples of
    g = 2^(⌈log₂ σ⌉ − 28) with exact discrete Gaussian noise (Canonne, Kamath & Steinke 2020),
    its variance enlarged to cover the rounding (L2 sensitivity Δ₂ + g·√d for d answers
    released together) so that the *same* GaussianDP event stays true; see
    :class:`LatticeGaussian` for the argument and the cost (noise larger by a factor
    1 + √d·(σ/Δ₂)·2⁻²⁷ at most).

    **In a session** (``docs/security.md``): as for :class:`~dpkit_central.laplace.Laplace`,
    ``check_input`` accepts any array of real numbers, ``coerce`` maps NaN → 0 and ±inf → ± the
    largest double per answer, and a vector answer is one release (``releases`` = 1) of a vector
    query whose L2 sensitivity is Δ₂.
    """

    name: ClassVar[str] = "gaussian"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    delta: float = parameter(DELTA, doc="failure probability δ in (0, 1)", typical=(1e-8, 1e-4))
    sensitivity: float = parameter(
        SENSITIVITY, doc="L2 sensitivity Δ₂ of the answer vector", default=1.0, typical=(0.1, 10.0)
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
        return self.sigma * self.sigma  # inf, not OverflowError, for a huge σ

    @property
    def domain(self) -> VectorDomain:
        return VectorDomain(self.sensitivity, norm=2.0)

    @property
    def privacy(self) -> GaussianDP:
        return GaussianDP(noise_multiplier=self.sigma / self.sensitivity, delta=self.delta)

    def lattice(self, coordinates: int = 1) -> LatticeGaussian:
        """The secure-mode plan (step, lattice sensitivity, variance) for that many answers."""
        return LatticeGaussian.plan(self.sigma, self.sensitivity, coordinates)

    def lattice_step(self) -> float:
        """g = 2^(⌈log₂ σ⌉ − 28): the spacing of secure-mode outputs."""
        return self.lattice().step

    def noise_for(self, rng: Any, coordinates: int = 1) -> AdditiveNoise:
        """The noise :meth:`randomize` adds with this ``rng`` to each of ``coordinates`` answers.

        Fast mode (a numpy Generator): N(0, σ²). Secure mode (None or a SecureRandom): g·N_ℤ(0, σ_L²)
        of :meth:`lattice` (``coordinates``), variance g²σ_L² (see :class:`AdditiveNoise`).
        """
        return gaussian_noise_for(self.sigma, self.sensitivity, rng, coordinates)

    def randomize(self, values: Any, /, *, rng: Any = None, changed: int | None = None) -> Any:
        """``values`` (finite reals, any shape) plus iid N(0, σ²) noise, as float64.

        In secure mode the noise is g·N_ℤ(0, σ_L²) on the lattice (see :class:`LatticeGaussian`;
        ``changed`` as in :func:`lattice_gaussian_release`). In fast mode a sum beyond the
        largest double is clipped back to it (post-processing).

        An accelerator's array (a CUDA tensor, a CuPy array) is released there, float64 on its
        device, in secure mode on the same lattice with the same exact sampler
        (:mod:`dpkit.tensors.noise`); ``rng`` may then also be a ``torch.Generator`` (fast
        mode).
        """
        return gaussian_release(
            values,
            sigma=self.sigma,
            sensitivity=self.sensitivity,
            rng=rng,
            owner=self.name,
            changed=changed,
        )

    def check_input(self, values: Any, /) -> None:
        """Public phase: an array of real numbers, any shape (dtype kind only, never values)."""
        check_answers(values, owner=self.name)

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[Any]:
        """Private phase: NaN → 0, ±inf → ± the largest double, per answer, and answers no
        double holds kept exact (:func:`~dpkit_central._validation.exact_answers`); never
        raises."""
        return exact_answers(values)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """Elementwise log-density −(y − x)²/(2σ²) − ln(σ√(2π)) (broadcasting).

        An accelerator's array (either operand) is scored on its device, float64, in its type,
        by the same formula in its namespace (:mod:`dpkit.tensors.log_probability`: a numpy or
        list operand beside it is copied there).
        """
        return density_log_probability(outputs, inputs, self._log_density, owner=self.name)

    def _log_density(self, xp: Any, y: Any, x: Any) -> Any:
        """The log-density of float64 arrays of the namespace ``xp`` (numpy's on the host). The
        square is z·z (numpy's z**2 is that product; a library's pow need not be)."""
        s = self.sigma
        z = (y - x) / s
        return -0.5 * (z * z) - math.log(s) - 0.5 * math.log(2.0 * math.pi)
