"""The central mechanisms' noise on an accelerator's arrays: Laplace, geometric, Gaussian.

Each function computes on the array's device, with its library's operations, and returns that
library's array on that device, of the input's shape: float64 for Laplace and Gaussian, int64
for geometric, whatever the input's dtype (as the host path returns them).

**Secure mode** (``rng=None`` or a :class:`~dpkit.randomness.SecureRandom`), the host's laws
exactly, on the call's ChaCha20 words (:mod:`dpkit.tensors.device_random`):

* :func:`laplace_noise`: the lattice release of the ``laplace`` plugin, g·(k + Z) with
  k = clamp(round(x/g), ±limit) (round half to even, as numpy's ``rint``) and Z discrete Laplace
  of scale t lattice steps (:func:`dpkit.tensors.exact.discrete_laplace`, the host sampler's law
  and word map); k + Z is an exact int64 and its conversion to float64 is post-processing.
* :func:`geometric_noise`: x + Z, Z discrete Laplace of the plugin's secure scale, in int64.
* :func:`gaussian_noise`: the lattice release of the ``gaussian`` plugin, g·(k + Z) with Z
  ~ N_ℤ(0, σ_L²) drawn by CKS20's rejection from the discrete Laplace
  (:func:`dpkit.tensors.exact.discrete_gaussian`: the host's proposal and acceptance test, with
  the elements still unaccepted redrawn in a masked loop).

**Fast mode** (a numpy or ``torch.Generator``: torch's Philox on torch tensors, ChaCha20 keyed
from a seed elsewhere; seedable, not attack-resistant). With U = (m + 1)·2⁻⁵³ and V = m′·2⁻⁵³
for the top 53 bits m, m′ of independent 64-bit words (U uniform on the grid of (0, 1],
V on [0, 1)):

* Laplace: x + b·(ln U₂ − ln U₁): −ln U is Exp(1) up to the float rounding of the logarithm
  (on the grid: |noise| ≤ 53·ln 2·b ≈ 36.7·b), and the difference of two independent Exp(1) is
  Lap(1) (Kotz, Kozubowski & Podgórski 2001, "The Laplace Distribution and Generalizations",
  Proposition 2.2.1);
* Gaussian: x + σ·√(−2 ln U)·cos(2πV) (Box & Muller 1958, "A Note on the Generation of Random
  Normal Deviates", Ann. Math. Stat. 29(2)), N(0, σ²) up to float rounding (|z| ≤ 8.57 on the
  grid);
* geometric: the secure law itself (the exact sampler on the fast words), so both modes add
  the same two-sided geometric of the plugin's secure scale (Δ/ε rounded up by one ulp, against
  the host fast path's float draw at α = e^(−ε/Δ)).

Floats are clipped to ± the largest double, as on the host. The numbers must be finite (NaN
and ±inf are an :class:`~dpkit.errors.InvalidData`; the message quotes no value); geometric
takes integers (integer dtypes, or floats holding whole numbers up to 2⁶²). These checks,
and the library's 64-bit types (JAX needs x64), come before any word is drawn.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpkit.errors import InvalidData, InvalidParameter
from dpkit.randomness.discrete import laplace_scale
from dpkit.randomness.secure_rng import SecureRandom
from dpkit.tensors.device_random import device_words, require_real_64_bit
from dpkit.tensors.duchi import uniform_53
from dpkit.tensors.exact import WordPairs, discrete_gaussian, discrete_laplace
from dpkit.tensors.libraries import ArrayLibrary, clamped_float64

__all__ = ["gaussian_noise", "geometric_noise", "laplace_noise"]

_MAX_FINITE = 1.7976931348623157e308
_UNIT = 2.0**-53
_WHOLE_LIMIT = 2.0**62
#: σ_L² of the device's discrete Gaussian: at least τ² = 2⁸ (every lattice plan's), below 2⁶²
#: (its acceptance test in int64 limbs).
_GAUSSIAN_STEPS = (1 << 8, 1 << 62)


def _check(library: ArrayLibrary, values: Any, *, owner: str, field: str) -> None:
    """The 64-bit types the exact law needs, and real numbers (no booleans, as on the host)."""
    require_real_64_bit(
        library,
        values,
        owner=owner,
        field=field,
        needs="the noise needs float64 and 64-bit integers",
    )


def _finite(library: ArrayLibrary, values: Any, *, owner: str, field: str) -> Any:
    """``values`` as a flat float64 array, refused if any is NaN or ±inf (integers clamped to
    ±2⁵³ first, as the host clamps them: :func:`~dpkit.tensors.libraries.clamped_float64`)."""
    xp = library.xp
    _check(library, values, owner=owner, field=field)
    x = xp.reshape(clamped_float64(xp, values), (-1,))
    if not bool(xp.all(xp.isfinite(x))):
        raise InvalidData(
            f"{owner}: {field} contain values that are not finite (NaN or ±inf); every answer "
            "must be a finite real number",
            field=field,
        )
    return x


def _secure(rng: Any) -> bool:
    return rng is None or isinstance(rng, SecureRandom)


def _uniforms(pairs: WordPairs, count: int) -> Any:
    """m·2⁻⁵³ for the top 53 bits m of ``count`` fresh 64-bit words: uniform on [0, 1)."""
    high, low = pairs.take(count)
    return uniform_53(pairs.xp, high, low)


def _clipped(xp: Any, released: Any, shape: tuple[int, ...]) -> Any:
    return xp.reshape(xp.clip(released, min=-_MAX_FINITE, max=_MAX_FINITE), shape)


def _lattice(xp: Any, x: Any, step: float, limit: int) -> Any:
    """k = clamp(round(x/g), ±limit) in int64, rounding half to even (the host's
    :func:`~dpkit_central._validation.lattice_steps`; x/g is exact, an overflow is clamped)."""
    bound = float(1 << 61)  # a double: the int64 clamp below is then exact
    k = xp.astype(xp.clip(xp.round(x / step), min=-bound, max=bound), xp.int64)
    return xp.clip(k, min=-limit, max=limit)


def laplace_noise(
    library: ArrayLibrary,
    values: Any,
    *,
    scale: float,
    step: float,
    steps: Fraction,
    limit: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """``values`` plus Laplace noise (float64, same shape and device): in secure mode the lattice
    release g·(clamp(round(x/g), ±``limit``) + Z), g = ``step``, Z discrete Laplace of scale
    ``steps`` lattice steps; in fast mode x + Lap(``scale``) (see the module docstring)."""
    xp = library.xp
    x = _finite(library, values, owner=owner, field=field)
    shape = tuple(values.shape)
    n = int(x.shape[0])
    if _secure(rng):
        exact = laplace_scale(steps, "discrete_laplace")  # public: refused before any draw
        pairs = WordPairs(device_words(library, rng, owner=owner))
        k = _lattice(xp, x, step, limit)
        noise = discrete_laplace(pairs, 1 / exact, n)
        released = xp.astype(k + noise, xp.float64) * step
        return _clipped(xp, released, shape) if step >= 2.0**960 else xp.reshape(released, shape)
    pairs = WordPairs(device_words(library, rng, owner=owner))
    first = _uniforms(pairs, n) + _UNIT
    second = _uniforms(pairs, n) + _UNIT
    return _clipped(xp, x + scale * (xp.log(second) - xp.log(first)), shape)


def gaussian_noise(
    library: ArrayLibrary,
    values: Any,
    *,
    sigma: float,
    step: float,
    sigma2_steps: int,
    limit: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """``values`` plus Gaussian noise (float64, same shape and device): in secure mode the
    lattice release g·(clamp(round(x/g), ±``limit``) + Z), g = ``step``, Z ~ N_ℤ(0, σ_L²) with
    σ_L² = ``sigma2_steps`` (:func:`dpkit.tensors.exact.discrete_gaussian`); in fast mode
    x + N(0, ``sigma``²) by Box–Muller (see the module docstring)."""
    xp = library.xp
    x = _finite(library, values, owner=owner, field=field)
    shape = tuple(values.shape)
    n = int(x.shape[0])
    if _secure(rng):
        if not _GAUSSIAN_STEPS[0] <= sigma2_steps < _GAUSSIAN_STEPS[1]:  # public: before any draw
            raise InvalidParameter(
                "sigma2", sigma2_steps, "in [2**8, 2**62) lattice steps on the device", owner=owner
            )
        pairs = WordPairs(device_words(library, rng, owner=owner))
        k = _lattice(xp, x, step, limit)
        released = xp.astype(k + discrete_gaussian(pairs, sigma2_steps, n), xp.float64) * step
        return _clipped(xp, released, shape) if step >= 2.0**960 else xp.reshape(released, shape)
    pairs = WordPairs(device_words(library, rng, owner=owner))
    radius = xp.sqrt(-2.0 * xp.log(_uniforms(pairs, n) + _UNIT))
    angle = (2.0 * math.pi) * _uniforms(pairs, n)
    return _clipped(xp, x + sigma * (radius * xp.cos(angle)), shape)


def _integer_answers(xp: Any, values: Any) -> Any:
    """Integer answers (or whole floats within ±2⁶², checked before) as int64 clamped to ±2⁶²,
    exactly as the host's ``integer_answers`` clamps them (a 1-Lipschitz map), so that an
    answer near the int64 limits plus the noise cannot wrap around to the other sign. An
    unsigned value of 2⁶³ or more becomes a negative int64 in the cast (the libraries compare
    no uint64 alike): it is replaced by the limit before the clamp, which is then exact."""
    limit = 1 << 62
    answers = xp.astype(values, xp.int64)
    if xp.isdtype(values.dtype, "unsigned integer"):
        answers = xp.where(answers < 0, xp.full_like(answers, limit), answers)
    return xp.clip(answers, min=-limit, max=limit)


def geometric_noise(
    library: ArrayLibrary,
    values: Any,
    *,
    scale: Fraction,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """``values`` (integers) plus two-sided geometric noise P[Z = z] ∝ e^(−|z|/``scale``),
    exactly, in int64 (same shape and device), in either mode (see the module docstring)."""
    xp = library.xp
    _check(library, values, owner=owner, field=field)
    if xp.isdtype(values.dtype, "real floating"):
        x = xp.astype(values, xp.float64)
        whole = xp.isfinite(x) & (x == xp.round(x)) & (xp.abs(x) <= _WHOLE_LIMIT)
        if not bool(xp.all(whole)):
            raise InvalidData(
                f"{owner}: {field} must be integers, got values that are not whole numbers "
                "(or beyond ±2**62)",
                field=field,
            )
    answers = xp.reshape(_integer_answers(xp, values), (-1,))
    exact = laplace_scale(scale, "discrete_laplace")
    pairs = WordPairs(device_words(library, rng, owner=owner))
    noise = discrete_laplace(pairs, 1 / exact, int(answers.shape[0]))
    return xp.reshape(answers + noise, tuple(values.shape))
