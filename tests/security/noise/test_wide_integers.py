"""Attack on the direct ``randomize`` and ``log_probability`` of the float mechanisms with 64-bit
integer answers or utilities beyond 2⁵³: converting them to the nearest double expands
distances (2⁵³ + 2 and 2⁵³ + 3, one apart, become 2⁵³ + 2 and 2⁵³ + 4), so the declared
sensitivity no longer bounds how far neighbouring answers are apart. A session's ``coerce``
clamps such integers to ±2⁵³ first (``exact_floats``); a direct call, on the host or on the
device path, must be as non-expansive.

Every check is deterministic (false-positive rate 0): a secure release with one key draws the
same integer noise for both neighbours, so the released values differ by exactly g·|k − k′|
(k the lattice indices), which must stay within the lattice sensitivity the noise is
calibrated to; a selection's declared log-probabilities must differ by at most ε.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from dpkit_central._validation import lattice_steps

import dpkit

torch = pytest.importorskip("torch")

KEY = bytes(range(32))
#: Neighbouring answers (one apart) that the doubles hold two apart.
NEIGHBOURS = (2**53 + 2, 2**53 + 3)
#: Neighbouring utility vectors (each utility moves by at most 1), whose gap the doubles widen
#: from 6 to 8: candidate 0 rounds up from 2⁵³ + 3 to 2⁵³ + 4, candidate 1 down from 2⁵³ + 9.
UTILITIES = ((2**53 + 2, 2**53 + 10), (2**53 + 3, 2**53 + 9))


def _spell(values: Any, how: str) -> Any:
    if how == "torch":
        return torch.tensor(values, dtype=torch.int64)
    return np.asarray(values, dtype=np.uint64 if how == "uint64" else np.int64)


def _host(released: Any) -> np.ndarray:
    return released.numpy() if hasattr(released, "numpy") else np.asarray(released)


@pytest.mark.parametrize("how", ["int64", "uint64", "torch"])
@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_secure_releases_of_wide_integers_keep_the_lattice_sensitivity(name: str, how: str) -> None:
    """Δ = 1 at ε = 2⁻²⁴ puts the lattice step at 2⁻⁶ (Laplace; at δ = 10⁻⁸ the Gaussian's at
    2⁻⁴), so 2⁵³ lies inside the lattice's ±2⁶¹ steps and is not clamped there: the double's
    rounding moved the indices 2/g apart against a bound of Δ/g + 1 (Laplace: the ratio
    e^(ε·128/65); Gaussian: a shift of 32 steps against Δ_L = 17)."""
    extra = {"delta": 1e-8} if name == "gaussian" else {}
    mechanism = dpkit.mechanism(name, epsilon=2.0**-24, sensitivity=1.0, **extra)
    g = mechanism.lattice_step()
    first, second = (
        _host(mechanism.randomize(_spell([x], how), rng=dpkit.SecureRandom.from_key(KEY)))
        for x in NEIGHBOURS
    )
    assert abs(float(second[0]) - float(first[0])) / g <= 1.0 / g + 1.0


@pytest.mark.parametrize("how", ["int64", "uint64", "torch"])
@pytest.mark.parametrize("name", ["exponential", "permute_and_flip", "report_noisy_max"])
def test_selections_of_wide_integer_utilities_keep_epsilon(name: str, how: str) -> None:
    """Δu = 1, ε = 1: the declared laws moved by up to 2.0 in log-probability (e^2 > e^1)."""
    mechanism = dpkit.mechanism(name, epsilon=1.0)
    outputs = torch.arange(2) if how == "torch" else np.arange(2)
    first, second = (
        _host(mechanism.log_probability(outputs, _spell(list(u), how))) for u in UTILITIES
    )
    assert float(np.max(np.abs(first - second))) <= 1.0 * (1 + 1e-9)
    assert all(math.isfinite(float(v)) for v in first)


@pytest.mark.parametrize("how", ["int64", "uint64", "torch"])
def test_geometric_answers_at_the_int64_limits_do_not_wrap(how: str) -> None:
    """Not a leak (the wrap is arithmetic modulo 2⁶⁴, a post-processing of x + Z) but a wrong
    release that ``coerce`` avoids: 2⁶³ − 1 plus positive noise came back near −2⁶³. A direct
    call now clamps to ±2⁶² as ``coerce`` does; 200 draws of one key include positive noise."""
    mechanism = dpkit.mechanism("geometric", epsilon=1.0)
    released = _host(
        mechanism.randomize(_spell([2**63 - 1] * 200, how), rng=dpkit.SecureRandom.from_key(KEY))
    )
    assert bool(np.all(released > 2**61))


def _exact_answers(values: list[Fraction], spell: str) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = (
            value
            if spell == "fraction"
            else Decimal(value.numerator) / Decimal(value.denominator)  # exact at 28 digits
        )
    return out


@pytest.mark.parametrize("spell", ["fraction", "decimal"])
@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_answers_no_double_holds_keep_the_lattice_sensitivity(name: str, spell: str) -> None:
    """Answers that no double holds, as a session reads them (``coerce``) onto the secure
    lattice (``lattice_steps``, what ``randomize`` adds the integer noise to): three answers
    2⁵² + 1/4 (where the doubles are 1 apart) each move by 1/3 (Δ = 1 in L1 and L2). Rounded
    to the nearest double, two of them moved a whole unit, 1/g steps; with the lattice step
    g = 2⁻⁶ of ε = 2⁻²⁴ that is 128 steps in L1 against Δ/g + 3 = 67 (Laplace), and 90.5 in
    L2 against Δ/g + √3 (Gaussian). Read exactly, each moves by 21 or 22. (The released
    values g·(k + Z) are doubles near 2⁵², 64 steps apart: they cannot show k, but they are
    computed from it.)"""
    extra = {"delta": 1e-8} if name == "gaussian" else {}
    mechanism = dpkit.mechanism(name, epsilon=2.0**-24, sensitivity=1.0, **extra)
    g = mechanism.lattice_step()
    start = Fraction(2**52) + Fraction(1, 4)
    first, second = (
        lattice_steps(mechanism.coerce(_exact_answers(answers, spell)), g, owner="", noise="")
        for answers in ([start] * 3, [start + Fraction(1, 3)] * 3)
    )
    assert first.tolist() == [round(start / Fraction(g))] * 3  # exactly x/g rounded
    steps = [abs(int(a) - int(b)) for a, b in zip(first, second, strict=True)]
    if name == "laplace":
        assert sum(steps) <= 1 / g + 3, steps
    else:
        assert math.sqrt(sum(s * s for s in steps)) <= 1 / g + math.sqrt(3), steps
    with dpkit.Session(budget=(1.0, 1e-6)) as session:  # and the session releases them
        session.release(mechanism, _exact_answers([start] * 3, spell))
