"""The central selections on an accelerator's arrays: report-noisy-max, exponential, permute-and-flip.

Each function takes utilities of shape (..., m) (one selection per row of the last axis, as on
the host), computes on their device with their library's operations, and returns the chosen
indices there, int64, of shape ``utilities.shape[:-1]`` (or (size,) for the exponential
mechanism's ``size`` draws from one row), in the caller's array type.

**Checks**, in the host's order of information: the dtype (real numbers, not booleans), the
library's 64-bit types (JAX needs x64) and the shape (at least one candidate) from the array
alone, and ``rng`` (a key or seed is taken from it, no word drawn); then the values, as the
host's ``as_utilities`` (the declared validation, an
:class:`~dpkit.errors.InvalidData` naming ``utilities`` that quotes no value): no NaN, no
+inf, at least one finite utility per row (−inf is a candidate never chosen). Only then is a
word drawn.

**Secure mode** (``rng=None`` or a :class:`~dpkit.randomness.SecureRandom`, ChaCha20 words
on the device): :func:`report_noisy_max_indices` is the host's exact release
(``dpkit_central.noisy_max.report_noisy_max_secure``): integer lattice scores
k = round(u/2^e) (ties to even), iid discrete Laplace noise Z of the lattice's exact scale
(:func:`dpkit.tensors.exact.discrete_laplace`, the host sampler's word map: for at most 2¹⁵
utilities the same 64-bit words give the host's noise, bit for bit), arg-max of k + Z with
the lowest index on ties. The scores are formed in float64 and int64 without big integers:

* u·2^(−e) is two multiplications by powers of two (exact unless the result overflows, and a
  result that underflows is below ½, which rounds to 0 either way), rounded half to even
  (IEEE 754 roundToIntegralTiesToEven): the host's k wherever it is a finite double;
* the relative score k_r − k* (k* the row's largest) is formed exactly by Knuth's TwoSum
  (Knuth, TAOCP vol. 2, §4.2.2, Theorem B): d = fl(k_r − k*) and the error k_r − k* − d are
  both integers, and their int64 sum is exact once |d| ≤ 2⁶² + 2¹²;
* a score that overflows float64 (|u/2^e| ≥ 2¹⁰²⁴) belongs to a utility whose ulp is at least
  2⁹⁷¹ lattice steps, so it differs from any other score by more than 2⁶² steps unless the
  utilities are equal: such pairs are told apart by their utilities.

Relative scores are clipped at −2⁶², as on the host: a clipped candidate cannot win while
every |Z| < 2⁶¹ (the host's argument). Where some |Z| ≥ 2⁶¹ (probability below e^(−2¹⁵) a
draw, for every scale the lattice allows) the host recomputes the row with Python integers
and the device keeps the clipped scores; the two laws differ on that event only.

:func:`exponential_indices` and :func:`permute_and_flip_indices` are the host's exact secure
samplers (``dpkit_central._selection``: ``exponential_secure``, ``permute_and_flip_secure``),
with the same output law, exactly: the mechanism on the double utilities given, γ_r = λ(u* −
u_r) an exact rational at ε's smaller reading and Δu's larger (``exact_rate``). Their coins are
:func:`dpkit.tensors.exp_coins.exp_coins`: [U < p] for a uniform U given by the device's words,
p = e^(−γ_r) (times 2^b/V_r for a proposal), decided on the device against a float bracket of
p with rigorously bounded error, the rare undecided ones (about 2⁻⁴² of them) settled on the
host with p's exact digits and U's next words; each coin is exactly Bernoulli(p) (see there).
The words are read differently from the host's, so the same words do not give the host's
indices; the law is the same:

* permute-and-flip (McKenna & Sheldon 2020, Algorithm 1): every candidate's coin
  Bernoulli(e^(−γ_r)), then a uniform choice among the heads (the maximiser's coin is heads,
  p = 1): the first heads in a uniform visiting order is a uniform element of the set of
  heads, as on the host. The choice is a rank exactly uniform below the row's number of heads
  (:func:`uniform_below_64`, rejection on 63-bit integers), located in the running count.
* the exponential mechanism (McSherry & Talwar 2007), by von Neumann's rejection as on the
  host: integer weights V_r = ⌈e^(−k_r/64)·2^b⌉ (the host's buckets k_r ≤ 64γ_r and its table's
  upper brackets, 2^b·m < 2⁶¹), int64 prefix sums per row (exact), a proposal r with
  probability V_r/ΣV exactly (a uniform integer below the row's total, located in the sums),
  accepted with probability e^(−γ_r)·2^b/V_r ≤ 1 (one exact coin, where the host flips two
  whose product has that probability); the rows not yet accepted propose again. An accepted
  r has probability ∝ V_r·e^(−γ_r)·2^b/V_r ∝ e^(λu_r). With ``size``, that many draws from
  one row, each its own rejection loop.

−inf utilities have V = 0 and coin probability 0: never chosen. The number of rounds and of
undecided coins depends on the words and the utilities; nothing raised after the values are
read depends on them.

**Fast mode** (a numpy or ``torch.Generator``: torch's Philox on torch tensors, ChaCha20 keyed
from a seed elsewhere; seedable, not attack-resistant), the host's fast algorithms with
uniforms U = m·2⁻⁵³ for the top 53 bits m of 64-bit words (numpy's ``random()`` grid):

* report-noisy-max: arg-max of u + b·(ln U₂′ − ln U₁′), U′ = U + 2⁻⁵³ on (0, 1] (Laplace
  noise as in :mod:`dpkit.tensors.noise`);
* exponential: inverse-CDF sampling on the float weights exp(λ(u − u*)) (the host's
  ``sample_by_weight``: the first index whose cumulative weight exceeds U·total);
* permute-and-flip: arrival times U₁ and coins U₂ < exp(λ(u − u*)); the accepted candidate
  with the earliest arrival.

These are the host's laws up to float rounding (a device's cumulative sum may add in a
different order than numpy's).

**Log-probabilities**: :func:`selection_log_operands` checks and gathers the operands of the
exponential mechanism's, permute-and-flip's and report-noisy-max's ``log_probability`` on the
device (the host's checks, dtypes and shapes first); the formula is the host's, shared
(``dpkit_central.exponential.selection_log_probability``; report-noisy-max's expansion in a
branch-free form), within the bound of docs/tensors.md of the host's values.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.errors import InvalidData, InvalidParameter
from dpkit.randomness.discrete import laplace_scale
from dpkit.randomness.exp_table import exp_table
from dpkit.randomness.secure_rng import SecureRandom
from dpkit.tensors.device_random import device_words, require_real_64_bit
from dpkit.tensors.duchi import uniform_53
from dpkit.tensors.exact import WordPairs, _count, _spread, discrete_laplace
from dpkit.tensors.exp_coins import CAP, exp_coins, rate_double
from dpkit.tensors.libraries import ArrayLibrary, clamped_float64
from dpkit.tensors.log_probability import DeviceOperands

__all__ = [
    "exponential_indices",
    "permute_and_flip_indices",
    "report_noisy_max_indices",
    "selection_log_operands",
]

_UNIT = 2.0**-53
_CLIP = 1 << 62
_INT64_MIN = -(1 << 63)
#: |fl(k_r − k*)| up to this is converted to int64 with its TwoSum error (|error| ≤ 2⁹).
_EXACT_SPAN = float((1 << 62) + (1 << 12))


def _secure(rng: Any) -> bool:
    return rng is None or isinstance(rng, SecureRandom)


def _check_structure(library: ArrayLibrary, values: Any, *, owner: str, field: str) -> None:
    """The public checks: real dtype, 64-bit types, at least one candidate (no value read)."""
    require_real_64_bit(
        library,
        values,
        owner=owner,
        field=field,
        needs="the selection needs float64 and 64-bit integers",
    )
    shape = tuple(values.shape)
    if not shape or shape[-1] == 0:
        raise InvalidData(
            f"{owner}: {field} must hold at least one candidate along the last axis, "
            f"got shape {shape}",
            field=field,
        )


def _utilities(library: ArrayLibrary, values: Any, *, owner: str, field: str) -> Any:
    """``values`` as float64 rows (R, m), refused (quoting no value) as the host refuses them;
    integers clamped to ±2⁵³ as the host clamps them (:func:`~dpkit.tensors.libraries.clamped_float64`)."""
    xp = library.xp
    m = int(values.shape[-1])
    u = xp.reshape(clamped_float64(xp, values), (-1, m))  # the host's clamp to ±2⁵³
    if bool(xp.any(xp.isnan(u))):
        raise InvalidData(
            f"{owner}: {field} contain NaN; utilities must be finite, or -inf for a candidate "
            "that is never chosen",
            field=field,
        )
    if bool(xp.any(u == xp.inf)):
        raise InvalidData(
            f"{owner}: {field} contain +inf; utilities must be finite, or -inf for a "
            "candidate that is never chosen",
            field=field,
        )
    if int(u.shape[0]) and bool(xp.any(xp.all(u == -xp.inf, axis=-1))):
        raise InvalidData(
            f"{owner}: every candidate of a selection has utility -inf, so there is nothing "
            "to choose; give at least one finite utility",
            field=field,
        )
    return u


def selection_log_operands(operands: DeviceOperands, *, owner: str) -> tuple[Any, Any, Any]:
    """The operands of a selection's ``log_probability`` on the device: (utilities as float64
    of ``inputs``' shape, int64 indices and their in-range mask, both of the broadcast shape of
    ``outputs`` and ``inputs.shape[:-1]``).

    The checks of the host (``as_utilities`` and ``selection_indices``), the public ones first:
    ``inputs``' dtype (real numbers, not booleans) and shape (at least one candidate),
    ``outputs``' dtype (integers or floats), the broadcast (numpy's ``ValueError``); then the
    values of ``inputs`` as the host's ``as_utilities`` (an :class:`~dpkit.errors.InvalidData`
    naming ``inputs`` that quotes no value). An index outside 0..m−1 (a fraction, NaN) is out
    of range: the mask is false there, and the index 0.
    """
    library, outputs, inputs = operands.library, operands.outputs, operands.inputs
    xp = library.xp
    _check_structure(library, inputs, owner=owner, field="inputs")
    if not xp.isdtype(outputs.dtype, ("integral", "real floating")):
        raise InvalidData(
            f"{owner}: outputs must be candidate indices (integers), got a {library.name} "
            f"array of {outputs.dtype}",
            field="outputs",
        )
    shape, m = tuple(inputs.shape), int(inputs.shape[-1])
    common = tuple(np.broadcast_shapes(tuple(outputs.shape), shape[:-1]))
    u = xp.reshape(_utilities(library, inputs, owner=owner, field="inputs"), shape)
    if xp.isdtype(outputs.dtype, "unsigned integer"):  # torch compares no uint64: as float64,
        outputs = xp.astype(outputs, xp.float64)  # exact below 2⁵³, and ≥ 2⁵³ > m beyond
    valid = (outputs >= 0) & (outputs < m)
    if xp.isdtype(outputs.dtype, "real floating"):
        valid = valid & (outputs == xp.floor(outputs))
    index = xp.astype(xp.where(valid, outputs, xp.zeros_like(outputs)), xp.int64)
    return u, xp.broadcast_to(index, common), xp.broadcast_to(valid, common)


def _uniforms(pairs: WordPairs, shape: tuple[int, ...]) -> Any:
    """m·2⁻⁵³ (m the top 53 bits of fresh 64-bit words), uniform on [0, 1), of ``shape``."""
    count = 1
    for d in shape:
        count *= d
    high, low = pairs.take(count)
    return pairs.xp.reshape(uniform_53(pairs.xp, high, low), shape)


def _scale_by_power_of_two(xp: Any, u: Any, power: int) -> Any:
    """u·2^power in two exact multiplications (each factor a normal double)."""
    first = power // 2
    return (u * 2.0**first) * 2.0 ** (power - first)


def relative_scores(xp: Any, u: Any, exponent: int) -> Any:
    """max(k_r − max_j k_j, −2⁶²) per row (int64), k = round(u/2^``exponent``) half to even,
    exactly (module docstring); 0 for −inf utilities (masked by the caller). Overflows to
    ±inf and the NaN of inf − inf are expected and masked (numpy-backed libraries are not
    warned of them)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _relative_scores(xp, u, exponent)


def _relative_scores(xp: Any, u: Any, exponent: int) -> Any:
    finite = u > -xp.inf
    k = xp.round(_scale_by_power_of_two(xp, xp.where(finite, u, 0.0), -exponent))
    k = xp.where(finite, k, -xp.inf)
    top = xp.max(k, axis=-1, keepdims=True)
    top_utility = xp.max(u, axis=-1, keepdims=True)
    both = xp.isfinite(k) & xp.isfinite(top)
    same = xp.where(xp.isfinite(top), k == top, u == top_utility)
    a = xp.where(both, k, 0.0)
    b = xp.where(both, -top, 0.0)
    d = a + b  # TwoSum: d + error = a + b exactly unless d overflows (then d = −inf: clipped)
    virtual = d - a
    error = (a - (d - virtual)) + (b - virtual)
    exact = both & (d >= -_EXACT_SPAN)  # d is finite here: an overflow is −inf
    d = xp.where(exact, d, 0.0)
    error = xp.where(exact, error, 0.0)
    rel = xp.astype(d, xp.int64) + xp.astype(error, xp.int64)
    clip = xp.asarray(-_CLIP, dtype=xp.int64, device=_device(u))
    rel = xp.where(exact, xp.maximum(rel, clip), clip)
    return xp.where(same | ~finite, xp.zeros_like(rel), rel)


def _device(array: Any) -> Any:
    import array_api_compat

    return array_api_compat.device(array)


def report_noisy_max_indices(
    library: ArrayLibrary,
    values: Any,
    *,
    scale: float,
    lattice: tuple[int, Fraction] | None,
    rng: Any,
    owner: str,
    field: str = "utilities",
) -> Any:
    """arg-max_r (u_r + noise) per row, int64 on the device: in secure mode the host's exact
    lattice release (``lattice`` = (e, t): lattice 2^e, discrete Laplace of scale t steps,
    required then); in fast mode continuous Lap(``scale``) noise (module docstring)."""
    xp = library.xp
    _check_structure(library, values, owner=owner, field=field)
    secure = _secure(rng)
    if secure:
        if lattice is None:
            raise InvalidParameter(
                "lattice", lattice, "(exponent, scale) in secure mode", owner=owner
            )
        exponent, steps = lattice
        exact = laplace_scale(steps, "discrete_laplace")  # public: before any value
    pairs = WordPairs(device_words(library, rng, owner=owner))  # rng checked: no word drawn
    u = _utilities(library, values, owner=owner, field=field)
    rows, m = int(u.shape[0]), int(u.shape[1])
    out_shape = tuple(values.shape[:-1])
    if secure:
        rel = relative_scores(xp, u, exponent)
        noise = xp.reshape(discrete_laplace(pairs, 1 / exact, rows * m), (rows, m))
        noisy = rel + noise
        floor = xp.asarray(_INT64_MIN, dtype=xp.int64, device=_device(noisy))
        noisy = xp.where(u > -xp.inf, noisy, floor)
    else:
        first = _uniforms(pairs, (rows, m)) + _UNIT
        second = _uniforms(pairs, (rows, m)) + _UNIT
        with np.errstate(over="ignore"):  # near ±1.8e308 the sum may round to ±inf: same order
            noisy = u + scale * (xp.log(second) - xp.log(first))  # −inf stays −inf
    chosen = xp.astype(xp.argmax(noisy, axis=-1), xp.int64)
    return xp.reshape(chosen, out_shape)


_INT64_MAX = (1 << 63) - 1
_LOW_63 = 0x7FFFFFFF


def uniform_below_64(pairs: WordPairs, bounds: Any) -> Any:
    """Integers exactly uniform on {0, …, B − 1}, one per element of the int64 ``bounds``
    (each B in [1, 2⁶²]), by rejection: x, the low 63 bits of a fresh word, is kept when
    x < 2⁶³ − (2⁶³ mod B) (a multiple of B), and gives x mod B; a rejected element draws a
    fresh word (probability (2⁶³ mod B)/2⁶³ < ½ a draw), the others keep theirs."""
    xp = pairs.xp
    largest = xp.asarray(_INT64_MAX, dtype=xp.int64, device=pairs.device)
    remainder = ((largest % bounds) + 1) % bounds  # 2⁶³ mod B, in int64
    limit = largest - remainder  # keep x ≤ 2⁶³ − 1 − (2⁶³ mod B)

    def draw(count: int) -> Any:
        high, low = pairs.take(count)
        return ((high & _LOW_63) << 32) | low

    x = draw(int(bounds.shape[0]))
    rejected = x > limit
    while count := _count(xp, rejected):
        x = _spread(xp, rejected, draw(count), x)
        rejected = rejected & (x > limit)
    return x % bounds


def _exact_rate(exact_rate: Fraction | None, owner: str) -> Fraction:
    if exact_rate is None:
        raise InvalidParameter(
            "exact_rate", exact_rate, "λ as a Fraction in secure mode", owner=owner
        )
    return exact_rate


def _proposal_weights(xp: Any, u: Any, top: Any, rate: Fraction, bits: int) -> Any:
    """V_r = ⌈e^(−k_r/64)·2^bits⌉_up (the table's upper bracket), int64, k_r = ⌊c·fl(u* − u_r)⌋
    ≤ 64γ_r (capped at 64·512), c = 64·λ̃·(1 − 2⁻⁵⁰): the host's ``_proposal_weights``; V = 0 for
    −inf utilities (never proposed), V = 2^bits for the row's largest (k = 0)."""
    upper, _ = exp_table()
    scale = rate_double(rate) or 0.0
    c = 64.0 * scale * (1.0 - 2.0**-50)
    finite = u > -xp.inf
    with np.errstate(over="ignore", invalid="ignore"):
        t = xp.floor((top - xp.where(finite, u, top)) * c)
    t = xp.where(finite, xp.minimum(t, float(CAP)), float(CAP))  # an overflow (inf) → the cap
    table = xp.asarray(upper, device=_device(u))
    bucket = xp.astype(xp.reshape(t, (-1,)), xp.int64)
    weights = xp.astype(xp.ceil(xp.take(table, bucket, axis=0) * float(1 << bits)), xp.int64)
    weights = xp.reshape(weights, tuple(u.shape))
    return xp.where(finite, weights, xp.zeros_like(weights))


def _exponential_secure(pairs: WordPairs, u: Any, rate: Fraction, size: int | None) -> Any:
    """The host's rejection sampler (``exponential_secure``) on the device: propose r with
    probability V_r/ΣV (an exact uniform integer below the row's total ΣV located in its int64
    prefix sums), accept it with the exact coin e^(−γ_r)·2^b/V_r, again for the draws not yet
    accepted. One draw per row, or ``size`` draws from row 0."""
    xp = pairs.xp
    rows, m = int(u.shape[0]), int(u.shape[1])
    bits = 61 - m.bit_length()  # ΣV ≤ m·2^bits < 2⁶¹
    top = xp.max(u, axis=-1, keepdims=True)
    weights = _proposal_weights(xp, u, top, rate, bits)
    prefix = xp.cumulative_sum(weights, axis=-1)
    draws = rows if size is None else size
    row_of = xp.arange(draws, dtype=xp.int64, device=pairs.device)
    if size is not None:
        row_of = xp.zeros_like(row_of)
    flat_u, flat_v = xp.reshape(u, (-1,)), xp.reshape(weights, (-1,))
    out = xp.zeros((draws,), dtype=xp.int64, device=pairs.device)
    pending = xp.ones((draws,), dtype=xp.bool, device=pairs.device)
    while _count(xp, pending):
        row = row_of[pending]
        target = uniform_below_64(pairs, xp.take(prefix[:, -1], row, axis=0))
        if size is not None:
            chosen = xp.astype(xp.searchsorted(prefix[0, :], target, side="right"), xp.int64)
        else:
            ends = xp.take(prefix, row, axis=0)
            chosen = xp.sum(xp.astype(ends <= target[:, None], xp.int64), axis=-1)
        where = row * m + chosen
        heads = exp_coins(
            pairs,
            xp.take(flat_u, where, axis=0),
            xp.take(top[:, 0], row, axis=0),
            rate,
            xp.take(flat_v, where, axis=0),
            bits,
        )
        out = _spread(xp, pending, xp.where(heads, chosen, 0), out)
        pending = _spread(xp, pending, ~heads, pending)
    return out


def _permute_and_flip_secure(pairs: WordPairs, u: Any, rate: Fraction) -> Any:
    """The host's ``permute_and_flip_secure`` on the device: every candidate's exact coin
    Bernoulli(e^(−γ_r)), then a uniform choice among the heads (the maximiser's coin is heads):
    a uniform rank below the row's count of heads (:func:`uniform_below_64`), located in the
    running count."""
    xp = pairs.xp
    rows, m = int(u.shape[0]), int(u.shape[1])
    top = xp.broadcast_to(xp.max(u, axis=-1, keepdims=True), (rows, m))
    heads = exp_coins(pairs, xp.reshape(u, (-1,)), xp.reshape(top, (-1,)), rate)
    heads = xp.astype(xp.reshape(heads, (rows, m)), xp.int64)
    rank = uniform_below_64(pairs, xp.sum(heads, axis=-1))
    running = xp.cumulative_sum(heads, axis=-1)
    return xp.sum(xp.astype(running <= rank[:, None], xp.int64), axis=-1)


def exponential_indices(
    library: ArrayLibrary,
    values: Any,
    *,
    rate: float,
    rng: Any,
    owner: str,
    exact_rate: Fraction | None = None,
    size: int | None = None,
    field: str = "utilities",
) -> Any:
    """The exponential mechanism on the device: index r with probability ∝ exp(λ·u_r) per row;
    with ``size``, that many draws from one row. Secure mode: the host's exact rejection sampler
    at ``exact_rate`` (λ, required then); fast mode: inverse-CDF on the float weights at
    ``rate`` (the host's ``sample_by_weight``) (module docstring)."""
    xp = library.xp
    _check_structure(library, values, owner=owner, field=field)
    secure = _secure(rng)
    if secure:
        exact = _exact_rate(exact_rate, owner)
    pairs = WordPairs(device_words(library, rng, owner=owner))  # rng checked: no word drawn
    u = _utilities(library, values, owner=owner, field=field)
    if secure:
        chosen = _exponential_secure(pairs, u, exact, size)
        return chosen if size is not None else xp.reshape(chosen, tuple(values.shape[:-1]))
    with np.errstate(over="ignore"):  # an overflow to −inf is weight 0
        z = (u - xp.max(u, axis=-1, keepdims=True)) * rate
        cumulative = xp.cumulative_sum(xp.exp(z), axis=-1)
    total = cumulative[:, -1:]
    if size is not None:
        target = _uniforms(pairs, (size,)) * total[0, 0]
        target = xp.minimum(target, xp.nextafter(total[0, 0], xp.zeros_like(total[0, 0])))
        return xp.astype(xp.searchsorted(cumulative[0, :], target, side="right"), xp.int64)
    target = _uniforms(pairs, (int(u.shape[0]), 1)) * total
    target = xp.minimum(target, xp.nextafter(total, xp.zeros_like(total)))
    chosen = xp.sum(xp.astype(cumulative <= target, xp.int64), axis=-1)
    return xp.reshape(chosen, tuple(values.shape[:-1]))


def permute_and_flip_indices(
    library: ArrayLibrary,
    values: Any,
    *,
    rate: float,
    rng: Any,
    owner: str,
    exact_rate: Fraction | None = None,
    field: str = "utilities",
) -> Any:
    """Permute-and-flip on the device. Secure mode: the host's exact sampler at ``exact_rate``
    (λ, required then): every coin Bernoulli(e^(−γ_r)) exactly, uniform among the heads. Fast
    mode: arrival times U₁, coins U₂ < exp(``rate``·(u − u*)), the accepted candidate with the
    earliest arrival (the host's fast algorithm) (module docstring)."""
    xp = library.xp
    _check_structure(library, values, owner=owner, field=field)
    secure = _secure(rng)
    if secure:
        exact = _exact_rate(exact_rate, owner)
    pairs = WordPairs(device_words(library, rng, owner=owner))  # rng checked: no word drawn
    u = _utilities(library, values, owner=owner, field=field)
    if secure:
        return xp.reshape(_permute_and_flip_secure(pairs, u, exact), tuple(values.shape[:-1]))
    with np.errstate(over="ignore"):  # a gap beyond the float range → −inf → p = 0
        p = xp.exp(rate * (u - xp.max(u, axis=-1, keepdims=True)))
    shape = (int(u.shape[0]), int(u.shape[1]))
    arrival = _uniforms(pairs, shape)
    accepted = _uniforms(pairs, shape) < p  # the maximiser has p = 1 > U₂
    arrival = xp.where(accepted, arrival, xp.inf)
    chosen = xp.astype(xp.argmin(arrival, axis=-1), xp.int64)
    return xp.reshape(chosen, tuple(values.shape[:-1]))
