"""Vectorised checks of query answers and utilities: typed errors naming the problem.

Two kinds of helper live here, for the two phases of a session's release (``docs/security.md``):

* *public, structural* checks (:func:`as_array`, :func:`check_kind`): they look at an input's
  number of dimensions and dtype kind only, never at a value, and raise
  :class:`~dpkit.InvalidData` before any budget is spent;
* *total, per-record* maps into a mechanism's domain (:func:`total_floats`,
  :func:`exact_floats`, :func:`finite_answers`, :func:`exact_answers`,
  :func:`integer_answers`, :func:`total_utilities`): they never raise,
  warn or report what they changed, so nothing observable depends on the private values.

The strict validators (:func:`as_finite`, :func:`as_integers`, :func:`as_utilities`) are for
direct calls of ``randomize`` by the holder of the data, who may be told what is wrong.
"""

from __future__ import annotations

import decimal
import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    InvalidData,
    InvalidParameter,
    as_array,
    describe_dtype,
    plain,
    readable,
    total_floats,
)

__all__ = [
    "EXACT_LIMIT",
    "LATTICE_LIMIT",
    "MAX_FINITE",
    "as_array",
    "as_finite",
    "as_integers",
    "as_utilities",
    "check_answers",
    "check_integer_answers",
    "check_kind",
    "exact_answers",
    "exact_floats",
    "finite_answers",
    "integer_answers",
    "kind_words",
    "lattice_release",
    "lattice_steps",
    "require_generator",
    "total_floats",
    "total_utilities",
]

#: The largest finite double: +inf answers and utilities are capped here (and −inf at its negative).
MAX_FINITE = float(np.finfo(np.float64).max)
#: Secure lattice indices are clamped to ±LATTICE_LIMIT steps (the integer noise is added in int64).
LATTICE_LIMIT = (1 << 61) - 1
#: Integer answers of the geometric mechanism are clamped to ±INTEGER_LIMIT (as ``as_integers``).
INTEGER_LIMIT = 1 << 62
#: Answers of the float mechanisms that no double holds are clamped to ±EXACT_LIMIT = 2⁵³, the
#: largest range of integers that doubles hold exactly (:func:`exact_floats`).
EXACT_LIMIT = 1 << 53


def kind_words(array: NDArray[Any]) -> str:
    """The dtype kind of ``array`` in words ("text", "complex numbers", ...), not a numpy repr."""
    return describe_dtype(array)


def check_kind(
    array: NDArray[Any], kinds: str, *, owner: str, field: str = "values", allowed: str
) -> None:
    """Refuse an array whose dtype kind is not in ``kinds`` (structure only, never values)."""
    if array.dtype.kind not in kinds:
        raise InvalidData(
            f"{owner}: {field} must be {allowed}, got an array of {kind_words(array)}",
            field=field,
        )


def check_answers(values: Any, *, owner: str) -> None:
    """The public check of laplace, gaussian and geometric: an array of real numbers (any shape;
    booleans and object arrays are accepted, their elements are mapped by ``coerce``)."""
    array = as_array(values, owner=owner)
    check_kind(array, "biufO", owner=owner, allowed="real numbers")


def finite_answers(values: Any) -> NDArray[np.float64]:
    """The total map of real answers into the finite floats (``coerce`` of laplace, gaussian).

    Elementwise: NaN (and anything that is not a real number) → 0, +inf → the largest finite
    double, −inf → its negative, finite values unchanged — read by :func:`exact_floats`, which
    clamps the integers that no double holds to ±2⁵³. Each coordinate is mapped on its
    own by a map that does not depend on the data, and a secure release then clamps the lattice
    index (:func:`lattice_steps`), a 1-Lipschitz map, so the declared sensitivity still bounds
    how far neighbouring answers can be apart.
    """
    floats = exact_floats(values)
    return np.nan_to_num(floats, copy=False, nan=0.0, posinf=MAX_FINITE, neginf=-MAX_FINITE)


def exact_answers(values: Any) -> NDArray[Any]:
    """The total map of real answers into the finite reals (``coerce`` of laplace, gaussian):
    :func:`finite_answers`, except that answers no double holds — an object array's fractions
    and decimals, a long double array's values — are kept exactly, as :class:`~fractions.Fraction`
    elements of an object array (float elements where a double holds them all).

    Rounding them to the nearest double would expand distances beyond the bound the lattice
    covers: the secure release rounds x/g to the nearest integer k, which moves each answer by
    at most half a step, but the doubles beyond 2⁵³·g are more than a step apart, so answers
    moving by less than their spacing can move by a whole spacing (three answers 2⁵² + 1/3
    moving by 1/3 each, Δ = 1, on the lattice of step 2⁻⁶ of ε = 2⁻²⁴, moved by 64 steps each
    against the 64 + 3 in all the noise covers; up to 2⁹ steps per coordinate below the
    lattice's clamp). No map into the doubles avoids that (the doubles there are sparser than
    the lattice), so the exact value reaches :func:`lattice_steps`, which rounds it exactly. An
    object array's finite elements are first clamped to ±2⁵³ by value, as
    :func:`exact_floats` clamps them; NaN and anything that is not a real number → 0, ±inf →
    ± the largest double. Per coordinate and never raising.
    """
    array = readable(values)
    if not _inexact_kind(array):
        return finite_answers(array)
    exact = [_exact_answer(value, strict=False) for value in array.ravel().tolist()]
    return _answers_array(exact, array.shape)


def _inexact_kind(array: NDArray[Any]) -> bool:
    """Whether ``array`` may hold reals that no double holds: Python values (an object array)
    or long doubles (a float dtype wider than 64 bits)."""
    kind = array.dtype.kind
    return (kind == "O" and array.size > 0) or (kind == "f" and array.dtype.itemsize > 8)


def _exact_answer(value: Any, *, strict: bool) -> float | Fraction | None:
    """One answer, exactly: a double as a float, another finite real (clamped to ±2⁵³, as
    :func:`exact_floats` does) as a float if a double holds it, else as a Fraction. Not a
    finite real: None if ``strict``, else 0.0 (NaN, not a number) or ± the largest double
    (±inf). Never raises."""
    clamped = _clamped_value(value)
    try:
        if isinstance(clamped, (bool, np.bool_)):
            return float(clamped)
        if isinstance(clamped, (float, np.float16, np.float32, np.float64)):
            number = float(clamped)
            if math.isfinite(number):
                return number
            if strict:
                return None
            return 0.0 if number != number else math.copysign(MAX_FINITE, number)
        if isinstance(clamped, (numbers.Rational, np.integer)):
            exact = Fraction(int(clamped)) if isinstance(clamped, np.integer) else clamped
        elif isinstance(clamped, decimal.Decimal):
            if not clamped.is_finite():
                if strict or clamped.is_nan():
                    return None if strict else 0.0
                return math.copysign(MAX_FINITE, 1 if clamped > 0 else -1)
            exact = Fraction(clamped)
        elif isinstance(clamped, np.floating):  # a long double
            if not np.isfinite(clamped):
                if strict or np.isnan(clamped):
                    return None if strict else 0.0
                return math.copysign(MAX_FINITE, 1 if clamped > 0 else -1)
            exact = Fraction(*clamped.as_integer_ratio())
        else:
            return None if strict else 0.0
        exact = Fraction(exact)
        near = float(exact)
        return near if Fraction(near) == exact else exact
    except Exception:  # a number-like whose comparison or conversion raises
        return None if strict else 0.0


def _answers_array(exact: list[Any], shape: tuple[int, ...]) -> NDArray[Any]:
    """Exact answers as float64 where doubles hold them all, else as an object array."""
    if all(isinstance(value, float) for value in exact):
        return np.array(exact, dtype=np.float64).reshape(shape)
    out = np.empty(len(exact), dtype=object)
    out[:] = exact
    return out.reshape(shape)


def exact_floats(values: Any) -> NDArray[np.float64]:
    """``values`` as float64 by a map that keeps neighbouring answers neighbours (the float
    mechanisms' ``coerce``; total, as :func:`total_floats`).

    A float array is read as it is (exactly), integers of up to 32 bits too. The answers that
    no double holds — 64-bit integers and Python values beyond ±2⁵³ — are first clamped to
    ±:data:`EXACT_LIMIT` = ±2⁵³, inside which every integer is a double, so converting them
    is exact. Rounding them to the nearest double instead would expand: the doubles beyond 2⁵³
    are 2 or more apart, so 2⁵³ + 1 and 2⁵³ + 2 (Δ = 1 apart) become 2⁵³ and 2⁵³ + 2. No
    1-Lipschitz map of the integers into the doubles does better: integers n and n + 1 beyond
    2⁵³ have no two distinct doubles within 1 of each other, so such a map is constant there.
    A clamp is 1-Lipschitz per coordinate and monotone, so ‖f(x) − f(x′)‖ ≤ ‖x − x′‖ in every
    Lp norm, one way if x′ − x is. An object array's finite elements (Python values: their
    types are data) are all clamped by value, floats too — one rule for every element, so that
    2⁶⁰ as a float and 2⁶⁰ + 1 as an int stay 1 apart.
    """
    array = readable(values)
    kind = array.dtype.kind
    if kind == "i" and array.dtype.itemsize > 4:
        array = np.clip(array, -EXACT_LIMIT, EXACT_LIMIT)
    elif kind == "u" and array.dtype.itemsize > 4:
        array = np.minimum(array, np.uint64(EXACT_LIMIT))
    elif kind == "O" and array.size:
        with np.errstate(all="ignore"):  # per-record comparisons: never a warning
            array = np.asarray(_clamped_values(array), dtype=object).reshape(array.shape)
    return total_floats(array)


def _clamped_value(value: Any) -> Any:
    """One Python value clamped to ±2⁵³ if it is a finite real number beyond them (±inf, NaN
    and anything that is not a number are left for :func:`total_floats`, and ±inf becomes ± the
    largest double as in a float array); never raises."""
    if not isinstance(value, (numbers.Real, decimal.Decimal, np.bool_)):
        return value
    number: Any = value
    try:
        if math.inf > number > EXACT_LIMIT:
            return EXACT_LIMIT
        if -math.inf < number < -EXACT_LIMIT:
            return -EXACT_LIMIT
    except Exception:  # a number-like whose comparison raises: total_floats decides
        return value
    return value


_clamped_values = np.frompyfunc(_clamped_value, 1, 1)


def check_integer_answers(values: Any, *, owner: str) -> None:
    """The public check of geometric: an array of integers (any shape) — an integer or boolean
    dtype, or Python values (a list: their types are data, mapped by :func:`integer_answers`).
    A float array is refused: no rounding of real answers keeps an L1 sensitivity (two answers
    0.99 and 1.0 apart by 0.01 round to 0 and 1; d such coordinates move the L1 distance by d),
    so the integers must be the caller's, with the sensitivity stated for them."""
    array = as_array(values, owner=owner)
    check_kind(
        array,
        "biuO",
        owner=owner,
        allowed="integers (an integer or boolean array; round real answers yourself, stating "
        "the sensitivity of the rounded answers, or use laplace)",
    )


def _integer_of(value: Any) -> int:
    """One Python value as an integer answer: integers (and booleans) exactly; another real
    number rounded down (floor); ±inf to ±INTEGER_LIMIT; NaN and anything that is not a real
    number to 0. Never raises."""
    try:
        if isinstance(value, (bool, np.bool_)):
            return int(value)
        if isinstance(value, numbers.Integral):
            number = int(value)
        elif isinstance(value, (numbers.Real, decimal.Decimal)):
            real: Any = value
            if real != real:
                return 0
            if real in (math.inf, -math.inf):
                return INTEGER_LIMIT if real > 0 else -INTEGER_LIMIT
            number = math.floor(real)
        else:
            return 0
        return max(-INTEGER_LIMIT, min(INTEGER_LIMIT, number))
    except Exception:  # a number-like whose comparison or conversion raises
        return 0


_integers_of = np.frompyfunc(_integer_of, 1, 1)


def integer_answers(values: Any) -> NDArray[np.int64]:
    """The total map of answers into the integers |k| ≤ 2⁶² (``coerce`` of geometric).

    Integers (and booleans) are kept exactly, clamped to ±2⁶²: a clamp is 1-Lipschitz, so
    integer answers within L1 distance Δ stay within Δ. Values outside the declared domain of
    integers (which only Python values can hold: the public check refuses float arrays) are
    mapped per coordinate by :func:`_integer_of` — rounded *down* (floor), never to the nearest:
    ⌊·⌋ is monotone and commutes with integer shifts, so one answer that moves by at most an
    integer Δ still does after it, where round-half-even takes 0.5 and 1.5 (Δ = 1 apart) to 0
    and 2. Python integers are never routed through floats (2⁵³ + 1 stays itself).
    """
    array = readable(values)
    if array.dtype.kind == "i":
        clamped = np.clip(array.astype(np.int64), -INTEGER_LIMIT, INTEGER_LIMIT)
        return np.asarray(clamped, dtype=np.int64)
    if array.dtype.kind in "ub":
        capped = np.minimum(array.astype(np.uint64), np.uint64(INTEGER_LIMIT))
        return np.asarray(capped, dtype=np.int64)
    if array.dtype.kind == "O":
        if array.size == 0:
            return np.zeros(array.shape, dtype=np.int64)
        with np.errstate(all="ignore"):  # per-record conversions: never a warning
            return np.asarray(_integers_of(array), dtype=np.int64).reshape(array.shape)
    floors = np.floor(finite_answers(array))
    return np.clip(floors, -float(INTEGER_LIMIT), float(INTEGER_LIMIT)).astype(np.int64)


def total_utilities(values: Any) -> NDArray[np.float64]:
    """The total map of a utility array (..., m) into the selection mechanisms' domain.

    Elementwise: NaN (or anything that is not a real number) → −inf (a candidate that is never
    chosen), +inf → the largest finite double; then a row whose utilities are all −inf becomes
    all zeros (a uniform choice). Finite values are unchanged (read by :func:`exact_floats`:
    integers that no double holds clamped to ±2⁵³). Capping at the largest double
    clamps every coordinate by the same data-independent 1-Lipschitz map, so utilities that were
    Δu-close stay Δu-close. Every ``randomize`` path takes the result: fast mode computes its
    float weights under ``np.errstate`` (an overflow to ±inf there is the right limit), and
    secure mode works with exact integers (Python ints when a row spans many binades).
    A 0-d input is read as one candidate.
    """
    array = readable(values)
    utilities = exact_floats(array)
    if utilities.ndim == 0:
        utilities = utilities.reshape(1)
    utilities[np.isnan(utilities)] = -np.inf
    utilities[utilities == np.inf] = MAX_FINITE
    if utilities.shape[-1]:
        empty = np.all(utilities == -np.inf, axis=-1)
        utilities[empty] = 0.0
    return _with_exact(utilities, array)


def _with_exact(floats: NDArray[np.float64], array: NDArray[Any]) -> NDArray[Any]:
    """``floats`` (the utilities of ``array`` read as doubles) with each finite value that no
    double holds — a fraction, a decimal, a long double; clamped to ±2⁵³ as
    :func:`exact_floats` clamps — put back exactly, as a Fraction (an object array then), for
    the exact samplers of secure mode (as :func:`exact_answers` keeps answers)."""
    if not _inexact_kind(array):
        return floats
    exact = [_exact_answer(value, strict=True) for value in array.ravel().tolist()]
    if not any(isinstance(value, Fraction) for value in exact):
        return floats
    out = floats.astype(object).reshape(-1)
    for i, value in enumerate(exact):
        if isinstance(value, Fraction):
            out[i] = value
    return out.reshape(floats.shape)


def require_generator(rng: Any, *, owner: str) -> np.random.Generator:
    """``rng`` if it is a numpy Generator: the floating-point samplers exist only there.

    dpkit's secure generator deliberately has no float Laplace/normal/exponential draws (their
    low bits leak the input; Mironov 2012), so a mechanism built on them refuses it with a
    typed error instead of an AttributeError.
    """
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameter(
            "rng",
            rng,
            "a numpy.random.Generator (fast mode): this mechanism draws floating-point noise, "
            "which has no secure sampler yet; for secure releases use 'laplace' or 'gaussian' "
            "(on a lattice) or 'geometric'",
            owner=owner,
        )
    return rng


def lattice_steps(
    answers: NDArray[np.float64], step: float, *, owner: str, noise: str
) -> NDArray[np.int64]:
    """The lattice indices clamp(round(x/g), ±(2⁶¹ − 1)) of the secure releases, as int64.

    x/g is exact (g is a power of two; an overflow to ±inf is clamped like any large value);
    an object array's exact answers (:func:`exact_answers`) are divided and rounded as
    fractions, ties to even as ``np.rint`` rounds a double's.
    The clamp keeps k + Z within int64 for the integer noise Z, and replaces the former error
    for answers beyond 2⁶¹ steps, whose message would have carried the answer's magnitude into
    the private phase. It is applied to each coordinate on its own and is 1-Lipschitz, so
    neighbouring answers keep ‖k − k′‖ ≤ Δ/g + (rounding), the bound the lattice
    mechanisms are calibrated to: the declared privacy is unchanged. Clamped answers are
    released as ±(2⁶¹ − 1)·g plus noise (about 2³¹ noise scales). ``owner`` and ``noise`` are
    kept for the callers' signature; no message depends on the answers.
    """
    del owner, noise
    if answers.dtype.kind == "O":  # exact answers (:func:`exact_answers`): rounded exactly
        g = Fraction(step)
        indices_of = (
            max(-LATTICE_LIMIT, min(LATTICE_LIMIT, round(Fraction(value) / g)))
            for value in answers.ravel().tolist()
        )
        return np.fromiter(indices_of, dtype=np.int64, count=answers.size).reshape(answers.shape)
    limit = float(1 << 61)  # exactly representable, so the int64 clamp below is exact
    steps = np.array(answers, dtype=np.float64)  # a copy, also for a 0-d array
    with np.errstate(over="ignore", invalid="ignore"):
        steps /= step
    np.rint(steps, out=steps)
    np.clip(steps, -limit, limit, out=steps)  # ±inf (overflow) → ±2⁶¹; NaN stays NaN
    if np.isnan(steps.sum()):  # one pass; NaN only from a caller that skipped the checks
        steps[np.isnan(steps)] = 0.0
    indices = steps.astype(np.int64)
    np.clip(indices, -LATTICE_LIMIT, LATTICE_LIMIT, out=indices)
    return indices


def lattice_release(
    steps: NDArray[np.int64], noise: NDArray[np.int64], step: float
) -> NDArray[np.float64]:
    """g·(k + Z) as float64: converting the exact integer k + Z is post-processing.

    |k + Z| < 2⁶³, so the product overflows the doubles only for g ≥ 2⁹⁶⁰ (a noise scale near
    1e300); it is then clipped back to ± the largest double.
    """
    released = np.add(steps, noise).astype(np.float64)
    released *= step
    if step >= 2.0**960:
        with np.errstate(over="ignore"):
            np.clip(released, -MAX_FINITE, MAX_FINITE, out=released)
    return released


def _numeric(values: Any, *, owner: str, field: str) -> NDArray[Any]:
    array = as_array(values, owner=owner, field=field)
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise InvalidData(
            f"{owner}: {field} must be real numbers, got an array of {describe_dtype(array)}",
            field=field,
        )
    return array


def _wide_floats(array: NDArray[Any]) -> NDArray[np.float64]:
    """A real array as float64 with 64-bit integers clamped to ±:data:`EXACT_LIMIT` (the strict
    validators' conversion, as :func:`exact_floats` converts for ``coerce``).

    Rounding 64-bit integers to the nearest double would expand distances (2⁵³ + 2 and
    2⁵³ + 3 become 2⁵³ + 2 and 2⁵³ + 4), so a declared sensitivity would no longer hold. The
    clamp is applied after the conversion: rounding to nearest is monotone and exact up to
    2⁵³, and 2⁵³ is a double, so min(max(fl(n), −2⁵³), 2⁵³) = fl(clamp(n, ±2⁵³)) = clamp(n, ±2⁵³)
    for every integer n — the 1-Lipschitz clamp of :func:`exact_floats`, computed exactly.
    """
    floats = array.astype(np.float64, copy=False)
    if array.dtype.kind in "iu" and array.dtype.itemsize > 4:
        floats = np.clip(floats, -float(EXACT_LIMIT), float(EXACT_LIMIT))
    return floats


def _first_bad(array: NDArray[Any], bad: NDArray[np.bool_]) -> Any:
    """The first flagged value as a plain Python value (``nan``, not ``np.float64(nan)``)."""
    return plain(array.flat[int(np.flatnonzero(bad.ravel())[0])])


def as_finite(values: Any, *, owner: str, field: str = "values") -> NDArray[Any]:
    """``values`` as a float64 array of finite numbers (NaN and ±inf are refused; 64-bit
    integers beyond ±2⁵³ are clamped there, as ``coerce`` clamps them: :func:`_wide_floats`).
    An object array of real numbers, or a long double array, is read exactly as
    :func:`exact_answers` reads it (an object array of Fractions where doubles cannot hold
    them), each element a finite real number.

    One cheap pass first: the sum of finite numbers is finite unless it overflows, so the
    elementwise check only runs when the sum is not finite.
    """
    raw = as_array(values, owner=owner, field=field)
    if _inexact_kind(raw):
        return _exact_finite(raw, owner=owner, field=field)
    array = _wide_floats(_numeric(values, owner=owner, field=field))
    with np.errstate(over="ignore", invalid="ignore"):
        total = array.sum()
    if not np.isfinite(total):
        bad = ~np.isfinite(array)
        if bad.any():
            raise InvalidData(
                f"{owner}: {field} contain {_first_bad(array, bad)!r} "
                f"({int(np.count_nonzero(bad))} value(s) not finite); every answer must be a "
                "finite real number",
                field=field,
            )
    return array


def _exact_finite(array: NDArray[Any], *, owner: str, field: str) -> NDArray[Any]:
    """The strict reading of an object or long double array of answers (:func:`as_finite`)."""
    exact = [_exact_answer(value, strict=True) for value in array.ravel().tolist()]
    bad = [i for i, value in enumerate(exact) if value is None]
    if bad:
        first = plain(array.ravel()[bad[0]])
        raise InvalidData(
            f"{owner}: {field} contain {first!r} ({len(bad)} value(s) not finite real "
            "numbers); every answer must be a finite real number",
            field=field,
        )
    return _answers_array(exact, array.shape)


def as_integers(values: Any, *, owner: str, field: str = "values") -> NDArray[np.int64]:
    """``values`` as an int64 array; floats are accepted only when they are whole numbers.

    Integers are clamped to ±2⁶² as ``coerce`` clamps them (:func:`integer_answers`), where
    a 64-bit answer near the int64 limits plus the noise wrapped around to the other sign.
    """
    array = _numeric(values, owner=owner, field=field)
    if np.issubdtype(array.dtype, np.integer):
        return integer_answers(array)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(array) | (array != np.round(array)) | (np.abs(array) > 2.0**62)
    if bad.any():
        raise InvalidData(
            f"{owner}: {field} must be integers, got {_first_bad(array, bad)!r} "
            f"({int(np.count_nonzero(bad))} value(s) not whole numbers)",
            field=field,
        )
    return array.astype(np.int64)


def as_utilities(
    utilities: Any, *, owner: str, field: str = "utilities", exact: bool = False
) -> NDArray[Any]:
    """A utility array of shape (..., m), m >= 1 candidates along the last axis.

    Entries are finite or −inf (a candidate that is never chosen); NaN and +inf are refused,
    and every row must have at least one finite utility. 64-bit integers beyond ±2⁵³ are
    clamped there (:func:`_wide_floats`), so Δu-close utilities stay Δu-close. With
    ``exact`` (the samplers of ``randomize``), an object array of real numbers or a long
    double array is accepted too, read as :func:`total_utilities` reads it: values no double
    holds kept as Fractions.
    """
    raw = as_array(utilities, owner=owner, field=field)
    if exact and _inexact_kind(raw):
        floats = _checked_utilities(exact_floats(raw), owner=owner, field=field)
        return _with_exact(floats, raw)
    array = _wide_floats(_numeric(utilities, owner=owner, field=field))
    return _checked_utilities(array, owner=owner, field=field)


def _checked_utilities(
    array: NDArray[np.float64], *, owner: str, field: str
) -> NDArray[np.float64]:
    if array.ndim == 0 or array.shape[-1] == 0:
        raise InvalidData(
            f"{owner}: {field} must hold at least one candidate along the last axis, "
            f"got shape {array.shape}",
            field=field,
        )
    with np.errstate(invalid="ignore", over="ignore"):
        total = array.sum()
    if not np.isfinite(total):
        nan = np.isnan(array)
        if nan.any():
            raise InvalidData(
                f"{owner}: {field} contain NaN ({int(np.count_nonzero(nan))} value(s)); "
                "utilities must be finite, or -inf for a candidate that is never chosen",
                field=field,
            )
        if (array == np.inf).any():
            raise InvalidData(
                f"{owner}: {field} contain +inf; utilities must be finite, or -inf for a "
                "candidate that is never chosen",
                field=field,
            )
        empty = np.all(array == -np.inf, axis=-1)
        if empty.any():
            raise InvalidData(
                f"{owner}: every candidate of {int(np.count_nonzero(empty))} selection(s) has "
                "utility -inf, so there is nothing to choose; give at least one finite utility",
                field=field,
            )
    return array
