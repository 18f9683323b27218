"""Exact discrete samplers on uniform 64-bit words: no floating point touches a sample.

The algorithms are those of Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for
Differential Privacy" (NeurIPS; arXiv 2004.00010), Section 5 — Algorithm 1 (Bernoulli(exp(−γ))
for rational γ), Algorithm 2 (discrete Laplace with rational scale) and Algorithm 3 (discrete
Gaussian with rational σ²) — run over whole arrays: each step draws for every entry still
pending and keeps only the entries that must go round again, so there is a Python loop per
*round* (a handful, each over a shrinking array) and never one per sample. Integers are
uint64 wherever they provably fit and Python ints (object arrays) only where they may not (the
discrete-Gaussian acceptance exponent at large σ).

:func:`discrete_laplace_constant_time` is the optional fixed-work variant (bit decomposition
of geometric variables), for when the sampling *time* must not depend on the noise (Jin et al.
2022, "Are We There Yet? Timing and Floating-Point Attacks on Differential Privacy Systems",
IEEE S&P, arXiv 2112.05307). It is within a stated total-variation distance of the
exact distribution (:func:`constant_time_tv_bound`), which a caller adds to δ.

Every sampler takes ``rng``: ``None`` (secure mode, the process-wide
:class:`~dpkit.randomness.SecureRandom`), a :class:`~dpkit.randomness.SecureRandom`, or a
numpy ``Generator`` (fast mode: the same exact algorithms on predictable words).
"""

from __future__ import annotations

import decimal
import functools
import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidParameter
from dpkit.randomness._words import U64, WordReader, bernoulli_ratio, uniform_below
from dpkit.randomness.modes import resolve_rng, word_reader

__all__ = [
    "bernoulli_exp",
    "bernoulli_exp_array",
    "constant_time_tv_bound",
    "discrete_gaussian",
    "discrete_laplace",
    "discrete_laplace_constant_time",
]

Size = int | tuple[int, ...] | None
_CHUNK = 1 << 18  # samples per pass: bounds the temporaries' memory
_MAX_PARAMETER = 1 << 62  # scale numerators/denominators: leaves uint64 headroom for U + t·V
_ROUNDS_CAP = 1 << 62  # ⌊γ⌋ beyond this cannot be reached by the e^-1 loop in practice


# --------------------------------------------------------------------------------------------
# Algorithm 1: Bernoulli(exp(−γ)), γ = n/d ≥ 0
# --------------------------------------------------------------------------------------------


def _bernoulli_exp_minus_one(words: WordReader, n: int) -> NDArray[np.bool_]:
    """Bernoulli(e⁻¹): CKS20 Algorithm 1 with γ = 1.

    Draw A_K ~ Bernoulli(1/K) for K = 1, 2, ... until the first A_K = 0; return 1 iff that K is
    odd. A₁ = 1 surely, so the loop starts at K = 2. P[stop at K] = (1/(K−1)!)(1 − 1/K), and
    P[K odd] = Σ_k (−1)^k / k! = e⁻¹. About e − 1 ≈ 1.72 words per draw.
    """
    out = np.empty(n, dtype=np.bool_)
    active = np.arange(n)
    k = 2
    while active.size:
        more = uniform_below(words, k, active.size) == 0
        out[active[~more]] = k % 2 == 1
        active = active[more]
        k += 1
    return out


def _bernoulli_ratio_over_k(
    words: WordReader, r: NDArray[Any], d: int | NDArray[Any], k: int, n: int
) -> NDArray[np.bool_]:
    """Bernoulli(r/(d·k)) exactly: one draw of uniform_below(d·k) when d·k < 2⁶⁴, else the
    product Bernoulli(r/d) · Bernoulli(1/k) of two independent draws (same probability)."""
    if r.dtype == object or (not isinstance(d, np.ndarray) and int(d) >= U64):
        dk: int | NDArray[Any] = d * k if not isinstance(d, np.ndarray) else d.astype(object) * k
        return bernoulli_ratio(words, np.asarray(r, dtype=object), dk, n)
    largest = int(d.max()) if isinstance(d, np.ndarray) else int(d)
    if largest * k < U64:
        dk = d * np.uint64(k) if isinstance(d, np.ndarray) else int(d) * k
        return bernoulli_ratio(words, r, dk, n)
    both: NDArray[np.bool_] = bernoulli_ratio(words, r, d, n) & (uniform_below(words, k, n) == 0)
    return both


def _bernoulli_exp_fraction(
    words: WordReader, r: NDArray[Any], d: int | NDArray[Any], n: int
) -> NDArray[np.bool_]:
    """Bernoulli(exp(−r/d)) for 0 ≤ r ≤ d: CKS20 Algorithm 1, case γ ∈ [0, 1].

    K ← 1; draw A ~ Bernoulli(γ/K), and while A = 1 set K ← K + 1 and draw again; return 1
    iff the final K is odd. P[K odd] = Σ_k (−γ)^k/k! = e^−γ (CKS20, Section 5).
    All entries still looping share K, so each round is one vectorised draw.
    """
    out = np.empty(n, dtype=np.bool_)
    active = np.arange(n)
    k = 1
    while active.size:
        dk = d[active] if isinstance(d, np.ndarray) else d
        more = _bernoulli_ratio_over_k(words, r[active], dk, k, active.size)
        out[active[~more]] = k % 2 == 1
        active = active[more]
        k += 1
    return out


def _bernoulli_exp(
    words: WordReader, num: NDArray[Any], den: int | NDArray[Any], n: int
) -> NDArray[np.bool_]:
    """Bernoulli(exp(−num/den)) elementwise: CKS20 Algorithm 1.

    For γ > 1: ⌊γ⌋ draws of Bernoulli(e⁻¹), returning 0 at the first failure, then one
    Bernoulli(exp(−(γ − ⌊γ⌋))) — as e^−γ = (e⁻¹)^⌊γ⌋ · e^−(γ−⌊γ⌋). Entries leave the e⁻¹ loop
    at their first failure, so the loop ends after a few dozen rounds whatever ⌊γ⌋ is.
    """
    big = num.dtype == object or (isinstance(den, np.ndarray) and den.dtype == object)
    big = big or (not isinstance(den, np.ndarray) and int(den) >= U64)
    if big:
        num_o = num.astype(object)
        den_o: Any = den.astype(object) if isinstance(den, np.ndarray) else int(den)
        whole_o = num_o // den_o
        frac: NDArray[Any] = num_o % den_o
        whole = np.where(whole_o > _ROUNDS_CAP, _ROUNDS_CAP, whole_o).astype(np.int64)
        has_frac = frac != 0
        den_used: int | NDArray[Any] = den_o
    else:
        den_u: Any = den.astype(np.uint64) if isinstance(den, np.ndarray) else np.uint64(den)
        whole = np.minimum(num // den_u, np.uint64(_ROUNDS_CAP)).astype(np.int64)
        frac = num % den_u
        has_frac = frac != 0
        den_used = den.astype(np.uint64) if isinstance(den, np.ndarray) else int(den)
    result = np.ones(n, dtype=np.bool_)
    alive = np.flatnonzero(whole > 0)
    rounds = 0
    while alive.size:
        rounds += 1
        ok = _bernoulli_exp_minus_one(words, alive.size)
        result[alive[~ok]] = False
        alive = alive[ok]
        alive = alive[whole[alive] > rounds]
    todo = np.flatnonzero(result & np.asarray(has_frac, dtype=np.bool_))
    if todo.size:
        d_todo = den_used[todo] if isinstance(den_used, np.ndarray) else den_used
        result[todo] = _bernoulli_exp_fraction(words, frac[todo], d_todo, todo.size)
    return result


# --------------------------------------------------------------------------------------------
# Algorithm 2: discrete Laplace, scale t/s
# --------------------------------------------------------------------------------------------


def _geometric_exp_minus_one(words: WordReader, n: int) -> NDArray[np.uint64]:
    """n iid V with P[V = v] = e^−v(1 − e⁻¹): the number of Bernoulli(e⁻¹) successes before
    the first failure (the loop for V in CKS20 Algorithm 2).

    Vectorised by parsing one long stream of iid Bernoulli(e⁻¹) trials into its runs "1…10":
    the run lengths of an iid stream are iid with exactly this law. Trials are drawn in pools;
    a run still open at the end of a pool is carried into the next pool (dropping it would
    bias the sample toward short runs).
    """
    out = np.empty(n, dtype=np.uint64)
    have, carry = 0, 0
    while have < n:
        need = n - have
        length = int(need * 1.66) + 64  # ≈ need / (1 − e⁻¹) trials, with a margin
        trials = _bernoulli_exp_minus_one(words, length)
        failures = np.flatnonzero(~trials)
        if failures.size == 0:
            carry += length
            continue
        runs = np.diff(failures, prepend=-1) - 1
        runs[0] += carry
        take = min(need, runs.size)
        out[have : have + take] = runs[:take]
        have += take
        carry = length - 1 - int(failures[-1])
    return out


def _rejection_fill(propose: Any, n: int, rate: float) -> NDArray[np.int64]:
    """``n`` accepted samples from ``propose(m)`` (the accepted ones among m iid candidates).

    Candidates are drawn in batches sized from the acceptance rate seen so far and the first
    accepted ones are kept in order. Which accepted candidates are kept depends only on the
    accept/reject pattern, and given that pattern the accepted values are iid from the target,
    so the output is exactly iid from the target (the surplus is discarded).
    """
    out = np.empty(n, dtype=np.int64)
    have = 0
    while have < n:
        need = n - have
        m = int(need / rate * 1.08) + 16
        got = propose(m)
        take = min(need, got.size)
        out[have : have + take] = got[:take]
        have += take
        rate = max(got.size / m, 0.01)
    return out


def _discrete_laplace(words: WordReader, s: int, t: int, n: int) -> NDArray[np.int64]:
    """CKS20 Algorithm 2: P[Z = z] = (e^{s/t} − 1)/(e^{s/t} + 1) · e^{−|z|·s/t}, z ∈ ℤ.

    Repeat until accepted: U ~ Uniform{0..t−1}; D ~ Bernoulli(exp(−U/t)) (reject if 0);
    V ~ Geometric(1 − e⁻¹) (failures of Bernoulli(e⁻¹)); X = U + t·V, which is geometric:
    P[X = x] ∝ e^{−x/t}; Y = ⌊X/s⌋, so P[Y = y] ∝ e^{−y·s/t}; B ~ Bernoulli(1/2);
    reject if B = 1 and Y = 0 (so that 0 is not counted twice); return (1 − 2B)·Y.
    """
    t64, s64 = np.uint64(t), np.uint64(s)
    v_max = (U64 - t) // t  # U + t·V < 2⁶⁴ whenever V ≤ v_max (U < t)

    def propose(m: int) -> NDArray[np.int64]:
        u = uniform_below(words, t, m)
        accept = np.ones(m, dtype=np.bool_)  # D = 1 surely when U = 0
        positive = np.flatnonzero(u)
        if positive.size:
            accept[positive] = _bernoulli_exp_fraction(words, u[positive], t, positive.size)
        u = u[accept]
        v = _geometric_exp_minus_one(words, u.size)
        wide = np.flatnonzero(v > np.uint64(v_max))
        wide_x = [int(u[i]) + t * int(v[i]) for i in wide]  # U + t·V ≥ 2⁶⁴: rare, exact ints
        v[wide] = 0
        y = (u + t64 * v) // s64
        for i, x in zip(wide, wide_x, strict=True):
            y[i] = x // s if x // s < 1 << 63 else 1 << 63
        if u.size and int(y.max()) >= 1 << 63:  # P ≤ e^{−2⁶³·s/t}: negligible for t/s ≤ 2⁵⁶
            msg = "a discrete Laplace sample does not fit in int64: the scale is too large"
            raise OverflowError(msg)
        negative = (words(u.size) >> np.uint64(63)).astype(np.bool_)
        z = y.astype(np.int64)
        np.negative(z, out=z, where=negative)
        accepted: NDArray[np.int64] = z[~(negative & (y == 0))]
        return accepted

    # Acceptance rate, only to size the batches: P[D = 1]·(1 − P[Y = 0]/2).
    p_d = -math.expm1(-1.0) / (t * -math.expm1(-1.0 / t))
    rate = p_d * (1 + math.exp(-s / t)) / 2
    return _rejection_fill(propose, n, rate)


# --------------------------------------------------------------------------------------------
# Algorithm 3: discrete Gaussian, σ² = a/b
# --------------------------------------------------------------------------------------------


def _discrete_gaussian(words: WordReader, a: int, b: int, n: int) -> NDArray[np.int64]:
    """CKS20 Algorithm 3: P[Z = z] ∝ exp(−z²/(2σ²)), z ∈ ℤ, σ² = a/b.

    Repeat: Y ~ discrete Laplace with scale t; accept Y with probability
    exp(−(|Y| − σ²/t)²/(2σ²)). The product of the two is e^{−|y|/t − (|y| − σ²/t)²/(2σ²)}
    = e^{−y²/(2σ²)} · e^{−σ²/(2t²)} ∝ e^{−y²/(2σ²)} for *every* t > 0 (the argument of
    CKS20, Section 5); t ≈ σ keeps the expected number of rounds small. CKS20 take t = ⌊σ⌋ + 1. For
    σ ≥ 1 we take the rational t = σ²/m with m = ⌊σ⌋ instead (t ∈ [σ, 2σ)), so that σ²/t = m is
    an integer and the exponent is (|Y| − m)²·b/(2a), which stays in uint64 for σ up to about
    2³⁰ instead of about 2¹⁴. For σ < 1 (or when σ²/m has a numerator or denominator beyond
    2⁶²) we use CKS20's integer t = ⌊σ⌋ + 1 and the exponent (|Y|·b·t − a)²/(2abt²). Python
    ints take over whenever a batch's exponent might not fit in uint64.
    """
    m = math.isqrt(a // b)
    scale = Fraction(a, b * m) if m >= 1 else Fraction(0)
    if m >= 1 and max(scale.numerator, scale.denominator) <= _MAX_PARAMETER:
        # γ = weight·(|Y|·stretch − centre)²/den with t = σ²/m:  b·(|Y| − m)²/(2a)
        stretch, centre, weight, den = 1, m, b, 2 * a
    else:
        t = m + 1  # γ = (|Y|·b·t − a)²/(2abt²)
        scale = Fraction(t)
        stretch, centre, weight, den = b * t, a, 1, 2 * a * b * t * t
    laplace_s, laplace_t = scale.denominator, scale.numerator

    def propose(count: int) -> NDArray[np.int64]:
        y = _discrete_laplace(words, laplace_s, laplace_t, count)
        magnitude = np.abs(y)  # |y| < 2⁶³ (checked by _discrete_laplace)
        largest = int(magnitude.max()) if count else 0
        spread = max(largest * stretch - centre, centre)
        if den < U64 and largest * stretch < 1 << 63 and weight * spread**2 < U64:
            centred = magnitude * np.int64(stretch) - np.int64(centre)
            root = np.abs(centred).astype(np.uint64)
            num: NDArray[Any] = root * root * np.uint64(weight)
        else:
            centred_o = magnitude.astype(object) * stretch - centre
            num = centred_o * centred_o * weight
        return y[_bernoulli_exp(words, num, den, count)]

    return _rejection_fill(propose, n, 0.5)


# --------------------------------------------------------------------------------------------
# Constant-time discrete Laplace: bit decomposition of geometric variables
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _constant_time_plan(scale: Fraction) -> NDArray[np.uint64]:
    """Thresholds T_j = round(p_j·2⁶⁴), p_j = q^{2^j}/(1 + q^{2^j}), q = e^{−1/scale}, j < J.

    J is the least integer with 2^J ≥ 64·ln 2·scale, so that q^{2^J} ≤ 2⁻⁶⁴. The p_j are
    computed in 60-digit decimal arithmetic, far below the 2⁻⁶⁵ rounding of T_j.
    """
    context = decimal.Context(prec=60)
    scale_d = context.divide(decimal.Decimal(scale.numerator), decimal.Decimal(scale.denominator))
    need = context.multiply(scale_d, context.multiply(64, context.ln(2)))
    bits = 1
    while context.power(2, bits) < need:
        bits += 1
    if bits > 62:
        raise InvalidParameter(
            "scale",
            float(scale),
            "at most 2**56 for the constant-time sampler",
            owner="discrete_laplace_constant_time",
        )
    thresholds = []
    for j in range(bits):
        x = context.exp(context.divide(-decimal.Decimal(2**j), scale_d))
        p = context.divide(x, context.add(1, x))
        thresholds.append(int(context.multiply(p, U64).to_integral_value(decimal.ROUND_HALF_EVEN)))
    return np.array(thresholds, dtype=np.uint64)


def _geometric_bits(words: WordReader, thresholds: NDArray[np.uint64], n: int) -> NDArray[np.int64]:
    """G = Σ_j 2^j·[w_j < T_j]: the J lowest binary digits of a geometric variable.

    If P[G = g] = (1 − q)·q^g then, writing g = Σ_j 2^j b_j, q^g = Π_j (q^{2^j})^{b_j}: the pmf
    factorises over the digits, which are therefore independent with
    P[b_j = 1] = q^{2^j}/(1 + q^{2^j}). Fixed work: exactly J words and compares per sample.
    """
    depth = thresholds.size
    w = words(n * depth).reshape(depth, n)
    g = np.zeros(n, dtype=np.uint64)
    for j in range(depth):
        g |= (w[j] < thresholds[j]).astype(np.uint64) << np.uint64(j)
    return g.astype(np.int64)


def constant_time_tv_bound(scale: Any, /) -> float:
    """Total-variation distance between :func:`discrete_laplace_constant_time` and the exact
    discrete Laplace: at most (2J + 2)·2⁻⁶⁴, J = ⌈log₂(64·ln 2·scale)⌉ digits per geometric.

    Each of the 2J digits has a probability off by at most 2⁻⁶⁵ (rounding of T_j) and truncating
    each geometric at J digits changes it with probability q^{2^J} ≤ 2⁻⁶⁴; total variation is
    subadditive over independent parts. Add this to δ when the constant-time sampler is used.
    """
    depth = _constant_time_plan(_rational(scale, "scale", "constant_time_tv_bound")).size
    return (2 * depth + 2) * 2.0**-64


# --------------------------------------------------------------------------------------------
# Public samplers
# --------------------------------------------------------------------------------------------


def _rational(value: Any, name: str, owner: str) -> Fraction:
    """An exact positive rational from an int, Fraction, Decimal, finite float or "p/q" string."""
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        if isinstance(value, (str, numbers.Rational, decimal.Decimal)):
            exact = Fraction(value)
        elif isinstance(value, (float, np.floating)) and math.isfinite(value):
            exact = Fraction(float(value))  # the exact binary value of the double
        else:
            raise TypeError
    except (TypeError, ValueError, ZeroDivisionError):
        exact = Fraction(-1)
    if exact <= 0:
        raise InvalidParameter(
            name,
            value,
            "a positive rational: an int, a Fraction, a finite float or 'p/q'",
            owner=owner,
        )
    return exact


def _shape(size: Size) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


def _chunked(
    sample: Any, words: WordReader, shape: tuple[int, ...], *args: int
) -> NDArray[np.int64]:
    count = math.prod(shape)
    out = np.empty(count, dtype=np.int64)
    for start in range(0, count, _CHUNK):
        stop = min(count, start + _CHUNK)
        out[start:stop] = sample(words, *args, stop - start)
    return out.reshape(shape)


def _finish(values: NDArray[Any], shape: tuple[int, ...]) -> Any:
    return values if shape else values.dtype.type(values[()])


def discrete_laplace(scale: Any, /, size: Size = None, *, rng: Any = None) -> Any:
    """Exact discrete Laplace samples: P[Z = z] = (1 − q)/(1 + q) · q^|z|, q = e^{−1/scale}.

    ``scale`` is a positive rational (int, Fraction, "p/q" string, or a float taken at its
    exact binary value) whose numerator and denominator are at most 2⁶². Canonne, Kamath &
    Steinke 2020, Algorithm 2, vectorised; ``rng`` is None (secure), a SecureRandom, or a
    numpy Generator (fast). Returns int64 (a scalar when ``size`` is None).

    >>> from dpkit.randomness import SecureRandom
    >>> z = discrete_laplace(3, size=1000, rng=SecureRandom())
    >>> z.dtype
    dtype('int64')
    """
    owner = "discrete_laplace"
    exact = _rational(scale, "scale", owner)
    if exact.numerator > _MAX_PARAMETER or exact.denominator > _MAX_PARAMETER:
        raise InvalidParameter(
            "scale",
            scale,
            "a rational whose numerator and denominator are at most 2**62",
            owner=owner,
        )
    generator, _ = resolve_rng(rng, owner=owner)
    shape = _shape(size)
    values = _chunked(
        _discrete_laplace, word_reader(generator), shape, exact.denominator, exact.numerator
    )
    return _finish(values, shape)


def discrete_gaussian(sigma2: Any, /, size: Size = None, *, rng: Any = None) -> Any:
    """Exact discrete Gaussian samples: P[Z = z] ∝ exp(−z²/(2σ²)), z ∈ ℤ, σ² = ``sigma2``.

    ``sigma2`` (σ², not σ) is a positive rational, as in Canonne, Kamath & Steinke 2020,
    Algorithm 3 (run on :func:`discrete_laplace` with scale ⌊σ⌋ + 1); σ may be at most 2⁶².
    Note Var[Z] < σ² (CKS20 show this; the gap is negligible once σ ≳ 1).

    >>> from dpkit.randomness import SecureRandom
    >>> discrete_gaussian(4, size=3, rng=SecureRandom()).shape
    (3,)
    """
    owner = "discrete_gaussian"
    exact = _rational(sigma2, "sigma2", owner)
    if math.isqrt(exact.numerator // exact.denominator) + 1 > _MAX_PARAMETER:
        raise InvalidParameter("sigma2", sigma2, "at most 2**124", owner=owner)
    generator, _ = resolve_rng(rng, owner=owner)
    shape = _shape(size)
    values = _chunked(
        _discrete_gaussian, word_reader(generator), shape, exact.numerator, exact.denominator
    )
    return _finish(values, shape)


def discrete_laplace_constant_time(scale: Any, /, size: Size = None, *, rng: Any = None) -> Any:
    """Discrete Laplace with a fixed amount of work per sample (no rejection loop).

    Z = G₁ − G₂ for independent geometric G (P[G = g] = (1 − q)q^g, q = e^{−1/scale}), which has
    exactly the discrete Laplace pmf (1 − q)/(1 + q)·q^|z| (Inusah & Kozubowski 2006, "A discrete
    analogue of the Laplace distribution", J. Stat. Plan. Inference 136(3)). Each G is drawn by
    its J lowest binary digits, which are independent Bernoullis (see :func:`_geometric_bits`),
    each one word compared with a 64-bit threshold: 2J words and compares per sample whatever
    the noise. The distribution is within :func:`constant_time_tv_bound` of exact in total
    variation; add that to δ. Data-independent control flow removes the timing channel of
    Jin et al. 2022 at the numpy level; it is not a hardened constant-time implementation.
    """
    owner = "discrete_laplace_constant_time"
    exact = _rational(scale, "scale", owner)
    thresholds = _constant_time_plan(exact)
    generator, _ = resolve_rng(rng, owner=owner)
    words = word_reader(generator)
    shape = _shape(size)
    count = math.prod(shape)
    out = np.empty(count, dtype=np.int64)
    step = 1 << 14  # J words per digit row: a few MB of temporaries
    for start in range(0, count, step):
        stop = min(count, start + step)
        out[start:stop] = _geometric_bits(words, thresholds, stop - start)
        out[start:stop] -= _geometric_bits(words, thresholds, stop - start)
    return _finish(out.reshape(shape), shape)


def bernoulli_exp(
    numerator: Any, denominator: Any = 1, /, *, size: Size = None, rng: Any = None
) -> Any:
    """Exact Bernoulli(exp(−γ)) draws, γ = numerator/denominator ≥ 0 (arrays broadcast).

    Canonne, Kamath & Steinke 2020, Algorithm 1, vectorised over the broadcast shape of
    ``numerator``, ``denominator`` and ``size``. Integers of any size are allowed (values beyond
    uint64 are handled with Python ints). This is the primitive behind permute-and-flip and the
    exponential mechanism with rational utilities.

    >>> from dpkit.randomness import SecureRandom
    >>> bool(bernoulli_exp(0, rng=SecureRandom()))  # exp(0) = 1
    True
    """
    owner = "bernoulli_exp"
    num = _integers(numerator, "numerator", owner, low=0)
    den = _integers(denominator, "denominator", owner, low=1)
    shape = np.broadcast_shapes(num.shape, den.shape, _shape(size))
    num_b = np.broadcast_to(num, shape).reshape(-1)
    den_b = np.broadcast_to(den, shape).reshape(-1)
    generator, _ = resolve_rng(rng, owner=owner)
    words = word_reader(generator)
    if num_b.dtype != object and den_b.dtype != object:
        num_b = num_b.astype(np.uint64)
        den_b = den_b.astype(np.uint64)
    else:
        num_b = num_b.astype(object)
        den_b = den_b.astype(object)
    den_arg: int | NDArray[Any] = int(den_b[0]) if den.ndim == 0 and den_b.size else den_b
    result = _bernoulli_exp(words, num_b, den_arg, num_b.size).reshape(shape)
    return result if shape else bool(result[()])


def bernoulli_exp_array(
    numerator: NDArray[Any], denominator: NDArray[Any], /, *, rng: Any = None
) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(−γ)) for arrays of rationals γ = numerator/denominator ≥ 0.

    The same sampler as :func:`bernoulli_exp` (Canonne, Kamath & Steinke 2020, Algorithm 1),
    for callers that already hold integer arrays, e.g. exact gaps of many utilities: the two
    arrays broadcast; each is an unsigned or signed integer array, or an object array of
    Python ints (any size). They are checked with whole-array operations (one C-level pass
    for the element types of an object array) instead of :func:`bernoulli_exp`'s
    per-element conversion, which dominates its cost on large object arrays. Values that fit
    in uint64 are sampled in uint64, others with Python ints. Returns a bool array of the
    broadcast shape.

    >>> from dpkit.randomness import SecureRandom
    >>> bernoulli_exp_array(np.array([0, 3]), np.array([1, 2]), rng=SecureRandom())[0]
    np.True_
    """
    owner = "bernoulli_exp_array"
    num = _integer_array(numerator, "numerator", owner, low=0)
    den = _integer_array(denominator, "denominator", owner, low=1)
    shape = np.broadcast_shapes(num.shape, den.shape)
    num_b = np.broadcast_to(num, shape).reshape(-1)
    den_b = np.broadcast_to(den, shape).reshape(-1)
    generator, _ = resolve_rng(rng, owner=owner)
    if num_b.dtype == object or den_b.dtype == object:
        num_b, den_b = num_b.astype(object), den_b.astype(object)
    result = _bernoulli_exp(word_reader(generator), num_b, den_b, num_b.size)
    return result.reshape(shape)


def _integer_array(value: Any, name: str, owner: str, *, low: int) -> NDArray[Any]:
    """A uint64 array, or an object array of Python ints when some value is ≥ 2⁶⁴; all ≥ low."""
    array = np.asarray(value)
    if array.dtype == object:
        kinds = set(map(type, array.reshape(-1).tolist()))
        ok = kinds <= {int}
        if ok and array.size and not bool(np.all(array >= low)):
            ok = False
        if not ok:
            raise InvalidParameter(name, "an array", f"integers >= {low}", owner=owner)
        if array.size and bool(np.all(array < U64)):
            return array.astype(np.uint64)
        return array
    if not np.issubdtype(array.dtype, np.integer) or (array.size and int(array.min()) < low):
        raise InvalidParameter(name, "an array", f"integers >= {low}", owner=owner)
    return array.astype(np.uint64)


def _integers(value: Any, name: str, owner: str, *, low: int) -> NDArray[Any]:
    """An int array (uint64 if every value fits, else Python-int objects) with values ≥ low."""
    array = np.asarray(value)
    if array.dtype == object:
        flat = [v for v in array.reshape(-1)]
        ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in flat)
        if not ok or (flat and min(int(v) for v in flat) < low):
            raise InvalidParameter(name, value, f"integers >= {low}", owner=owner)
        if not flat or max(int(v) for v in flat) < U64:
            return np.array([int(v) for v in flat], dtype=np.uint64).reshape(array.shape)
        return np.array([int(v) for v in flat] + [None], dtype=object)[:-1].reshape(array.shape)
    if not np.issubdtype(array.dtype, np.integer) or (array.size and int(array.min()) < low):
        raise InvalidParameter(name, value, f"integers >= {low}", owner=owner)
    return array.astype(np.uint64)
