"""Exact comparisons of exponential variables with thresholds, digit by digit.

Bernoulli(e^(−γ)) is the event E > γ for E ~ Exp(1) (P[E > γ] = e^(−γ)); equally, for any
u > 0, it is the event X > u·γ for X = u·E, which has P[X > x] = e^(−x/u): an exponential
variable of rate ρ = 1/u. This module decides X > t exactly, with X drawn lazily from its
independent digits, so that a comparison usually costs one 64-bit word:

* the integer part J = ⌊X⌋ is geometric with rate ρ (P[J ≥ j] = e^(−ρj)); its digits are
  independent (:mod:`dpkit.randomness.geometric`) and are drawn *top digit first*, each
  narrowing X to an interval [P·2^s, (P + 1)·2^s);
* the fraction F = X − J is independent of J with density ∝ e^(−ρf) on [0, 1); its base-2¹²
  digits are again independent, digit j having the truncated law ∝ e^(−ρ·2^(−12j)·d) on
  [0, 4096) (the same factorisation of e^(−ρf) over the digits of f);
* a comparison stops as soon as X's interval lies entirely above or below t. Targets are
  given as two floats lo ≤ t ≤ hi (compared exactly with the interval ends, which are floats
  exactly while they have at most 53 significant bits), and, for the rare elements whose
  interval still meets [lo, hi] after three fractional digits, exactly as a rational
  (``exact``), compared digit by digit with Python integers.

X equals t with probability 0, so "X ≥ t" and "X > t" are the same event almost surely.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpkit.randomness._alias import AliasTable, alias_table
from dpkit.randomness._words import WordReader
from dpkit.randomness.geometric import GeometricPlan, geometric_plan

__all__ = ["exponential_exceeds", "fraction_stage"]

FRACTION_BITS = 12
#: Fractional digits compared in floats before the exact comparison takes over.
FLOAT_DIGITS = 3
_EXACT_LIMIT = float(1 << 40)  # J below this: J + F·2^(−36) is exact in a double

ExactTargets = Callable[[NDArray[np.intp]], list[Fraction]]


@functools.lru_cache(maxsize=256)
def _fraction_table(rate: Fraction, depth: int) -> AliasTable:
    """The law of fractional digit ``depth`` (1, 2, …) of an Exp(rate) variable."""
    return alias_table(rate / (1 << (FRACTION_BITS * depth)), FRACTION_BITS, True)


#: Comparisons per pass: the temporaries stay in the CPU cache (and fresh allocations, which
#: cost page faults, stay small).
CHUNK = 1 << 15


def exponential_exceeds(
    rate: Fraction,
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    exact: ExactTargets,
    words: WordReader,
) -> NDArray[np.bool_]:
    """[X_i > t_i] for X_i iid with P[X > x] = e^(−rate·x), where lo_i ≤ t_i ≤ hi_i (t_i ≥ 0).

    ``exact(indices)`` returns the targets t_i exactly for those indices; it is called only for
    elements that the floats cannot decide. The rate must be below 64·ln 2. Works through the
    arrays in chunks of 2¹⁵.
    """
    plan = geometric_plan(rate)
    if not plan.tables:
        raise ValueError("exponential_exceeds needs a rate below 64·ln 2")
    n = lo.size
    if n <= CHUNK:
        return _exceeds_chunk(plan, lo, hi, exact, words)
    out = np.empty(n, dtype=np.bool_)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)

        def shifted(indices: NDArray[np.intp], start: int = start) -> list[Fraction]:
            return exact(indices + start)

        out[start:stop] = _exceeds_chunk(plan, lo[start:stop], hi[start:stop], shifted, words)
    return out


def _exceeds_chunk(
    plan: GeometricPlan,
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    exact: ExactTargets,
    words: WordReader,
) -> NDArray[np.bool_]:
    """:func:`exponential_exceeds` on one chunk, with the geometric plan of the rate."""
    rate = plan.rate
    n = lo.size
    if len(plan.tables) == 1:  # J from one table: decide every element in whole-array passes
        base = plan.tables[0].sample(words, n)
        low = base.astype(np.float64)  # X ∈ [J, J + 1); exact while J < 2^53
        result = low >= hi
        low += 1.0
        pending = np.flatnonzero(~result & (low > lo))
        if not pending.size:
            return result
    else:
        result = np.zeros(n, dtype=np.bool_)
        pending = np.arange(n)
        base = np.zeros(n, dtype=np.int64)  # J's digits drawn so far (top first)
        for table, shift in reversed(list(zip(plan.tables, plan.shifts, strict=True))):
            digit = table.sample(words, pending.size)
            base[pending] += digit << shift
            low = base[pending].astype(np.float64)  # X ≥ low; exact while J < 2^53
            pending = _settle(pending, low, float(1 << shift), lo, hi, result)
            if not pending.size:
                return result
    return fraction_stage(rate, pending, base, lo, hi, exact, words, result)


def fraction_stage(
    rate: Fraction,
    pending: NDArray[np.intp],
    base: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    exact: ExactTargets,
    words: WordReader,
    result: NDArray[np.bool_],
) -> NDArray[np.bool_]:
    """Finish [X > t] for the ``pending`` elements, whose integer part J = ``base`` is drawn:
    the fraction F = X − J (density ∝ e^(−rate·f) on [0, 1), independent of J), 12 bits at a
    time, against the float brackets, then exactly. Writes into and returns ``result``."""
    n = base.size
    start = base[pending].astype(np.float64)
    if start.size and float(start.max()) >= _EXACT_LIMIT:  # J ≥ 2⁴⁰: leave it to Fractions
        return _exact_rest(rate, pending, base, 0, np.zeros(n, np.int64), exact, words, result)
    frac = np.zeros(n, dtype=np.int64)
    for depth in range(1, FLOAT_DIGITS + 1):
        digit = _fraction_table(rate, depth).sample(words, pending.size)
        frac[pending] = (frac[pending] << FRACTION_BITS) | digit
        unit = 2.0 ** (-FRACTION_BITS * depth)
        low = base[pending].astype(np.float64) + frac[pending].astype(np.float64) * unit
        pending = _settle(pending, low, unit, lo, hi, result)
        if not pending.size:
            return result
    return _exact_rest(rate, pending, base, FLOAT_DIGITS, frac, exact, words, result)


def _settle(
    pending: NDArray[np.intp],
    low: NDArray[np.float64],
    width: float,
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    result: NDArray[np.bool_],
) -> NDArray[np.intp]:
    """X ∈ [low, low + width) for the pending elements: mark X ≥ hi true, drop X < lo too;
    return the elements whose interval still meets [lo, hi]."""
    above = low >= hi[pending]
    below = low + width <= lo[pending]
    result[pending[above]] = True
    remaining: NDArray[np.intp] = pending[~(above | below)]
    return remaining


def _exact_rest(
    rate: Fraction,
    pending: NDArray[np.intp],
    base: NDArray[np.int64],
    depth: int,
    frac: NDArray[np.int64],
    exact: ExactTargets,
    words: WordReader,
    result: NDArray[np.bool_],
) -> NDArray[np.bool_]:
    """Finish the comparisons the floats could not decide, with exact rationals."""
    targets = exact(pending)
    for index, target in zip(pending.tolist(), targets, strict=True):
        scale = 1 << (FRACTION_BITS * depth)
        low = Fraction(int(base[index]) * scale + int(frac[index]), scale)
        width = Fraction(1, scale)
        level = depth
        while low < target < low + width:  # X ∈ [low, low + width) straddles t: refine
            level += 1
            width /= 1 << FRACTION_BITS
            low += int(_fraction_table(rate, level).sample(words, 1)[0]) * width
        result[index] = low >= target
    return result
