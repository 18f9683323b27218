"""Exact discrete samplers on uniform 64-bit words: no floating point decides a sample.

* :func:`discrete_laplace` — the digit sampler of :mod:`dpkit.randomness.geometric`: the
  discrete Laplace as sign × (nonzero) × (1 + geometric), the geometric drawn from its
  independent base-2^b digits with exact alias tables. Exact, and a fixed amount of work per
  draw (no rejection loop whose length depends on the noise), which closes the timing channel
  of Jin et al. 2022 ("Are We There Yet? Timing and Floating-Point Attacks on Differential
  Privacy Systems", IEEE S&P, arXiv 2112.05307).
* :func:`discrete_gaussian` — Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for
  Differential Privacy" (NeurIPS; arXiv 2004.00010), Algorithm 3 (rejection from a discrete
  Laplace proposal), with the proposal drawn by :func:`discrete_laplace` and the acceptance
  test Bernoulli(exp(−γ)) decided as E > γ for an exponential E drawn digit by digit
  (:mod:`dpkit.randomness._exponential`): about one word per test instead of CKS20
  Algorithm 1's loop of ~10 words and rounds.
* :func:`bernoulli_exp` / :func:`bernoulli_exp_array` — Bernoulli(exp(−γ)) for rational γ, by
  the same comparison.

CKS20's own Algorithms 1–2 remain in :mod:`dpkit.randomness.cks20` as the reference.

Every sampler takes ``rng``: ``None`` (secure mode, the process-wide
:class:`~dpkit.randomness.SecureRandom`), a :class:`~dpkit.randomness.SecureRandom`, or a
numpy ``Generator`` (fast mode: the same exact algorithms on predictable words).
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidParameter
from dpkit.randomness._exact import ExactReal, bernoulli_bracketed_real
from dpkit.randomness._exponential import exponential_exceeds, fraction_stage
from dpkit.randomness._words import U64, WordReader
from dpkit.randomness.geometric import discrete_laplace_digits, geometric_plan
from dpkit.randomness.modes import resolve_rng, word_reader

__all__ = [
    "bernoulli_bracketed",
    "bernoulli_exp",
    "bernoulli_exp_array",
    "bernoulli_exp_bracketed",
    "discrete_gaussian",
    "discrete_laplace",
    "laplace_scale",
    "rejection_fill",
]

Size = int | tuple[int, ...] | None
_CHUNK = 1 << 15  # samples per pass of the Gaussian sampler: its temporaries stay in cache
_MAX_PARAMETER = 1 << 62  # largest numerator/denominator of a scale
#: The scales the discrete Laplace sampler takes: below 2⁻²⁰ its digit tables outgrow memory
#: (and P[Z ≠ 0] < 2e^(−2²⁰) anyway); above 2⁵⁵ a draw overflows int64 with probability
#: e^(−2⁶³/scale) ≥ e^(−256) — no longer negligible. σ² of the discrete Gaussian likewise.
_MIN_LAPLACE_SCALE = Fraction(1, 1 << 20)
_MAX_LAPLACE_SCALE = Fraction(1 << 55)
_GAUSSIAN_SIGMA2 = (Fraction(1, 1 << 60), Fraction(1 << 110))
#: Bernoulli(exp(−γ)) is decided as X > 64γ for X = 64·E (rate 1/64): one 12-bit digit table
#: settles ⌊X⌋, and X's integer part ties with ⌊64γ⌋ with probability at most 1/64.
_BERNOULLI_RATE = Fraction(1, 64)
_MARGIN = 2.0**-50  # relative bracket of a target computed in a few float operations
_FLOAT_CAP = 1e300  # a target beyond this is bracketed by [1e300, inf]


def rejection_fill(
    propose: Callable[[int], NDArray[np.int64]], n: int, rate: float
) -> NDArray[np.int64]:
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
        m = int(need / rate * 1.02) + 64  # 2% spare: a second round is rare
        got = propose(m)
        take = min(need, got.size)
        out[have : have + take] = got[:take]
        have += take
        rate = max(got.size / m, 0.01)
    return out


def _bracket(
    approx: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """[lo, hi] ∋ t for targets t ≥ 0 computed as ``approx`` within a relative 2⁻⁵⁰.

    Overflow (inf, or beyond 1e300) gives [1e300, inf]; a result below 1e-290, where
    subnormal rounding loses the relative bound, gives [0, 1e-290].
    """
    lo = np.minimum(approx * (1.0 - _MARGIN), _FLOAT_CAP)
    hi = approx * (1.0 + _MARGIN)
    hi[~(approx < _FLOAT_CAP)] = np.inf
    tiny = approx < 1e-290
    lo[tiny] = 0.0
    hi[tiny] = 1e-290
    return lo, hi


def _bernoulli_exp(
    words: WordReader, num: NDArray[Any], den: int | NDArray[Any], n: int
) -> NDArray[np.bool_]:
    """Bernoulli(exp(−num/den)) elementwise: [64·E > 64·num/den], E ~ Exp(1), exactly.

    ``num`` is uint64 or an object array of Python ints; ``den`` an int or such an array.
    """
    if num.dtype == object or (isinstance(den, np.ndarray) and den.dtype == object):
        nums = [int(v) for v in num.tolist()]
        dens = [int(v) for v in den.tolist()] if isinstance(den, np.ndarray) else [int(den)] * n
        approx = np.array([_ratio_float(64 * a, d) for a, d in zip(nums, dens, strict=True)])
    else:
        den_f = den.astype(np.float64) if isinstance(den, np.ndarray) else float(den)
        approx = num.astype(np.float64) * 64.0 / den_f
        nums = dens = []

    def exact(indices: NDArray[np.intp]) -> list[Fraction]:
        out = []
        for i in indices.tolist():
            top = nums[i] if nums else int(num[i])
            d = dens[i] if dens else int(den[i] if isinstance(den, np.ndarray) else den)
            out.append(Fraction(64 * top, d))
        return out

    lo, hi = _bracket(approx)
    return exponential_exceeds(_BERNOULLI_RATE, lo, hi, exact, words)


def _ratio_float(num: int, den: int) -> float:
    try:
        return float(Fraction(num, den))  # correctly rounded
    except OverflowError:
        return math.inf


def _accept_integer(
    rate: Fraction, c: NDArray[np.int64], r: int, words: WordReader
) -> NDArray[np.bool_]:
    """[X > c²/2^r] for X exponential of a rate in [64·ln 2/4095, 64·ln 2) (so that its integer
    part comes from one digit table), |c| < 2³² and r ≥ 1, in integers: K = ⌊c²/2^r⌋ = c² >> r; J = ⌊X⌋ > K
    accepts, J < K rejects, and only J = K (probability about rate) looks at the fraction
    (:func:`~dpkit.randomness._exponential.fraction_stage`, target (c² mod 2^r)/2^r)."""
    (table,) = geometric_plan(rate).tables
    j = table.sample(words, c.size)
    square = np.abs(c).astype(np.uint64)
    square *= square  # exact: |c| < 2³²
    k = (square >> np.uint64(r)).view(np.int64)  # < 2⁶³ as r ≥ 1
    result: NDArray[np.bool_] = j > k
    tie = np.flatnonzero(j == k)
    if tie.size:
        remainder = square[tie] & np.uint64((1 << r) - 1)
        target = k[tie].astype(np.float64) + np.ldexp(remainder.astype(np.float64), -r)
        lo, hi = target * (1.0 - _MARGIN), target * (1.0 + _MARGIN)  # two roundings at most

        def exact(indices: NDArray[np.intp]) -> list[Fraction]:
            return [Fraction(int(square[tie[i]]), 1 << r) for i in indices.tolist()]

        decided = fraction_stage(
            rate, np.arange(tie.size), j[tie], lo, hi, exact, words, np.zeros(tie.size, np.bool_)
        )
        result[tie] = decided
    return result


# --------------------------------------------------------------------------------------------
# CKS20 Algorithm 3: discrete Gaussian, σ² = a/b
# --------------------------------------------------------------------------------------------


def _discrete_gaussian(words: WordReader, a: int, b: int, n: int) -> NDArray[np.int64]:
    """CKS20 Algorithm 3: P[Z = z] ∝ exp(−z²/(2σ²)), z ∈ ℤ, σ² = a/b.

    Repeat: Y ~ discrete Laplace with scale t; accept Y with probability
    exp(−(|Y| − σ²/t)²/(2σ²)). The product of the two is e^{−|y|/t − (|y| − σ²/t)²/(2σ²)}
    = e^{−y²/(2σ²)} · e^{−σ²/(2t²)} ∝ e^{−y²/(2σ²)} for *every* t > 0 (the argument of
    CKS20, Section 5). For σ ≥ 1 we take t = σ²/m with m = ⌊σ⌋ (t ∈ [σ, 2σ)), so that σ²/t = m
    and γ = (|Y| − m)²·b/(2a); for σ < 1, CKS20's t = 1 and γ = (|Y|·b − a)²/(2ab). Either way
    γ = c²·w/D with an integer c; a proposal is accepted about 76% of the time for large σ
    (√(π/2)·e^(−1/2)).

    The acceptance test is X > c²/2^r for X = u·E, E ~ Exp(1), u = D/(w·2^r) ∈ [32, 64): the
    event E > γ scaled by u (:func:`~dpkit.randomness._exponential.exponential_exceeds`; the
    target c²/2^r is bracketed in floats and exact in Python integers). Timing: the proposal
    takes fixed work; the test takes one word unless ⌊X⌋ = ⌊u·γ⌋, and given acceptance that
    happens with probability ≈ (1 − frac(uγ))/u whatever |Y| is (X − uγ is again exponential,
    by memorylessness), so the work does not track the value returned.
    """
    m = math.isqrt(a // b)
    if m >= 1:
        scale, shift, stretch, weight, den = Fraction(a, b * m), m, 1, b, 2 * a
    else:
        scale, shift, stretch, weight, den = Fraction(1), a, b, 1, 2 * a * b
    r = (den // weight).bit_length() - 6  # u = D/(w·2^r) ∈ [32, 64)
    rate = Fraction(weight << r, den) if r >= 0 else Fraction(weight, den << -r)
    unit = math.ldexp(1.0, -r)
    laplace_rate = 1 / scale

    def propose(count: int) -> NDArray[np.int64]:
        y = discrete_laplace_digits(laplace_rate, words, count)
        magnitude = np.abs(y)
        largest = int(magnitude.max()) if count else 0
        if stretch == 1 and r >= 1 and largest < (1 << 32) - shift:  # the common case
            accepted: NDArray[np.int64] = y[_accept_integer(rate, magnitude - shift, r, words)]
            return accepted
        if stretch < 1 << 20 and shift < 1 << 52 and largest < 1 << 40:  # small σ: int64 c
            exact_c: Any = magnitude * stretch - shift  # |c| < 2⁶¹
            approx = exact_c.astype(np.float64)
        else:
            exact_c = magnitude.astype(object) * stretch - shift
            approx = np.array([float(v) for v in exact_c.tolist()], dtype=np.float64)
        with np.errstate(over="ignore"):
            approx = approx * approx * unit  # c rounded, squared, scaled: within 2⁻⁵¹
        lo, hi = _bracket(approx)

        def exact(indices: NDArray[np.intp]) -> list[Fraction]:
            return [Fraction(int(exact_c[i]) ** 2) * Fraction(unit) for i in indices.tolist()]

        accepted = y[exponential_exceeds(rate, lo, hi, exact, words)]
        return accepted

    # √(π/2)·e^(−1/2) ≈ 0.760: the acceptance rate for large σ; later rounds measure it.
    return rejection_fill(propose, n, 0.76 if m >= 4 else 0.5)


# --------------------------------------------------------------------------------------------
# Public samplers
# --------------------------------------------------------------------------------------------


def _rational(value: Any, name: str, owner: str) -> Fraction:
    """An exact positive rational from an int, Fraction, Decimal, finite float or "p/q" string."""
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        if isinstance(value, np.integer):  # a numpy int is Rational, but not in Fraction's sums
            value = int(value)
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
    exact binary value) whose numerator and denominator are at most 2⁶², in [2⁻²⁰, 2⁵⁵]
    (smaller scales outgrow the digit tables, larger ones overflow int64). The sampler
    (:mod:`dpkit.randomness.geometric`) draws Z = sign × nonzero × (1 + G) with G geometric,
    G from its independent digits through exact alias tables: exactly this law, with the same
    number of words and operations for every draw (ties of probability 2⁻⁴⁸ and less aside),
    so its run time does not depend on the noise. ``rng`` is None (secure), a SecureRandom,
    or a numpy Generator (fast). Returns int64 (a scalar when ``size`` is None).

    >>> from dpkit.randomness import SecureRandom
    >>> z = discrete_laplace(3, size=1000, rng=SecureRandom())
    >>> z.dtype
    dtype('int64')
    """
    owner = "discrete_laplace"
    exact = laplace_scale(scale, owner)
    generator, _ = resolve_rng(rng, owner=owner)
    shape = _shape(size)
    values = discrete_laplace_digits(1 / exact, word_reader(generator), math.prod(shape))
    return _finish(values.reshape(shape), shape)


def laplace_scale(scale: Any, owner: str) -> Fraction:
    """The exact scale :func:`discrete_laplace` takes (the checks of its docstring), or an
    :class:`~dpkit.errors.InvalidParameter` naming ``scale``."""
    exact = _rational(scale, "scale", owner)
    if exact.numerator > _MAX_PARAMETER or exact.denominator > _MAX_PARAMETER:
        raise InvalidParameter(
            "scale",
            scale,
            "a rational whose numerator and denominator are at most 2**62",
            owner=owner,
        )
    if not _MIN_LAPLACE_SCALE <= exact <= _MAX_LAPLACE_SCALE:
        raise InvalidParameter("scale", scale, "in [2**-20, 2**55]", owner=owner)
    return exact


def discrete_gaussian(sigma2: Any, /, size: Size = None, *, rng: Any = None) -> Any:
    """Exact discrete Gaussian samples: P[Z = z] ∝ exp(−z²/(2σ²)), z ∈ ℤ, σ² = ``sigma2``.

    ``sigma2`` (σ², not σ) is a positive rational, as in Canonne, Kamath & Steinke 2020,
    Algorithm 3 (run on :func:`discrete_laplace`; see :func:`_discrete_gaussian`); σ² lies in
    [2⁻⁶⁰, 2¹¹⁰] (σ at most 2⁵⁵, so no draw overflows int64 but with probability e^(−256)). Note Var[Z] < σ² (CKS20 show this; the gap is negligible once σ ≳ 1).

    >>> from dpkit.randomness import SecureRandom
    >>> discrete_gaussian(4, size=3, rng=SecureRandom()).shape
    (3,)
    """
    owner = "discrete_gaussian"
    exact = _rational(sigma2, "sigma2", owner)
    if not _GAUSSIAN_SIGMA2[0] <= exact <= _GAUSSIAN_SIGMA2[1]:
        raise InvalidParameter("sigma2", sigma2, "in [2**-60, 2**110]", owner=owner)
    generator, _ = resolve_rng(rng, owner=owner)
    shape = _shape(size)
    values = _chunked(
        _discrete_gaussian, word_reader(generator), shape, exact.numerator, exact.denominator
    )
    return _finish(values, shape)


def bernoulli_exp(
    numerator: Any, denominator: Any = 1, /, *, size: Size = None, rng: Any = None
) -> Any:
    """Exact Bernoulli(exp(−γ)) draws, γ = numerator/denominator ≥ 0 (arrays broadcast).

    Decided as E > γ for an exponential E drawn digit by digit (see :func:`_bernoulli_exp`;
    the event has probability e^(−γ), CKS20's Algorithm 1 samples the same Bernoulli with a
    loop), vectorised over the broadcast shape of ``numerator``, ``denominator`` and ``size``.
    Integers of any size are allowed (values beyond uint64 are handled with Python ints).

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


def bernoulli_exp_bracketed(
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    exact: Callable[[NDArray[np.intp]], list[Fraction]],
    /,
    *,
    rng: Any = None,
) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(−γ_i)) draws for exponents known to lie in floats lo_i ≤ γ_i ≤ hi_i.

    For callers whose exponents are exact rationals that are costly to form (for example the
    gaps λ(u* − u) of float utilities): a float bracket of each decides almost every draw, and
    ``exact(indices)`` is asked for the exact γ_i (Fractions) of the few it leaves open — about
    a fraction 2⁻⁶ of the draws whose bracket is tight, fewer when γ is large. Each draw is the
    event E > γ for an exponential E drawn digit by digit (:func:`_bernoulli_exp`), so the
    probability is exactly e^(−γ_i) whatever the brackets are, as long as they hold. Returns a
    bool array of the brackets' shape.

    >>> from fractions import Fraction
    >>> from dpkit.randomness import SecureRandom
    >>> gamma = np.array([0.0, 50.0])
    >>> bernoulli_exp_bracketed(
    ...     gamma, gamma, lambda i: [Fraction(float(gamma[j])) for j in i], rng=SecureRandom()
    ... )[0]
    np.True_
    """
    generator, _ = resolve_rng(rng, owner="bernoulli_exp_bracketed")
    low, high, shape = _brackets(lo, hi, 0.0, np.inf, "bernoulli_exp_bracketed")
    scaled_lo = np.minimum(np.broadcast_to(low, shape).reshape(-1) * 64.0, _FLOAT_CAP)
    with np.errstate(over="ignore"):
        scaled_hi = np.broadcast_to(high, shape).reshape(-1) * 64.0

    def scaled_exact(indices: NDArray[np.intp]) -> list[Fraction]:
        return [64 * g for g in exact(indices)]

    result = exponential_exceeds(
        _BERNOULLI_RATE, scaled_lo, scaled_hi, scaled_exact, word_reader(generator)
    )
    return result.reshape(shape)


def _brackets(
    lo: Any, hi: Any, smallest: float, largest: float, owner: str
) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[int, ...]]:
    """Float arrays with smallest ≤ lo ≤ hi ≤ largest everywhere (NaN fails), and their shape."""
    low = np.asarray(lo, dtype=np.float64)
    high = np.asarray(hi, dtype=np.float64)
    try:
        shape = np.broadcast_shapes(low.shape, high.shape)
    except ValueError:
        raise InvalidParameter(
            "hi", "an array", "the shape of lo (or broadcastable)", owner=owner
        ) from None
    if low.size and not (bool(np.all(low >= smallest)) and bool(np.all(low <= high))):
        raise InvalidParameter(
            "lo", "an array", f"numbers ≥ {smallest:g} and ≤ hi, elementwise", owner=owner
        )
    if high.size and not bool(np.all(high <= largest)):
        raise InvalidParameter("hi", "an array", f"numbers ≤ {largest:g}", owner=owner)
    return low, high, shape


def bernoulli_bracketed(
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    exact: Callable[[NDArray[np.intp]], list[Callable[[decimal.Context], decimal.Decimal]]],
    /,
    *,
    rng: Any = None,
) -> NDArray[np.bool_]:
    """Exact Bernoulli(p_i) draws for probabilities known to lie in floats lo_i ≤ p_i ≤ hi_i.

    One word per draw decides it unless the word falls between lo_i·2⁶⁴ and hi_i·2⁶⁴; for those
    (about 2⁻⁴⁹ of the draws when the brackets are tight) ``exact(indices)`` returns, for each
    index, an evaluator ``f(context) -> Decimal`` of p_i, correct to a few units of the
    context's precision (e.g. composed of ``decimal``'s correctly rounded exp, multiply and
    divide), from which the binary digits of p_i are computed as far as the comparison needs.
    p_i must not be a dyadic rational strictly between 0 and 1 for which a bracket is not
    tight (such a p is better drawn with an integer threshold). Returns a bool array of the
    brackets' (broadcast) shape.
    """
    generator, _ = resolve_rng(rng, owner="bernoulli_bracketed")
    low, high, shape = _brackets(lo, hi, 0.0, 1.0, "bernoulli_bracketed")

    def reals(indices: NDArray[np.intp]) -> list[ExactReal]:
        return [ExactReal(f, slack=64) for f in exact(indices)]

    result = bernoulli_bracketed_real(
        np.broadcast_to(low, shape).reshape(-1),
        np.broadcast_to(high, shape).reshape(-1),
        reals,
        word_reader(generator),
    )
    return result.reshape(shape)


def bernoulli_exp_array(
    numerator: NDArray[Any], denominator: NDArray[Any], /, *, rng: Any = None
) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(−γ)) for arrays of rationals γ = numerator/denominator ≥ 0.

    The same sampler as :func:`bernoulli_exp`, for callers that already hold integer arrays, e.g. exact gaps of many utilities: the two
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
