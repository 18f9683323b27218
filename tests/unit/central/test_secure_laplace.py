"""Secure-mode Laplace releases on a lattice (no low bit depends on the data); the fast float
Laplace is shown to leak through its low bits (Mironov 2012)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpkit

KEY = bytes(
    range(32)
)  # fixed key: deterministic statistical tests (SecureRandom.from_key is test-only)


@pytest.mark.parametrize("scale_parts", [(1.0, 1.0), (3.0, 0.7), (0.01, 2.0)])
def test_secure_outputs_lie_on_the_lattice_whatever_the_input(
    scale_parts: tuple[float, float],
) -> None:
    sensitivity, epsilon = scale_parts
    laplace = dpkit.mechanism("laplace", epsilon=epsilon, sensitivity=sensitivity)
    g = laplace.lattice_step()
    assert g == 2.0 ** round(math.log2(g))  # a power of two
    rng = dpkit.SecureRandom.from_key(KEY)
    for x in (0.0, 1 / 3, math.pi, -1e5 + 1e-9, 123456.789):
        out = laplace.randomize(np.full(2000, x), rng=rng)
        steps = out / g
        assert np.array_equal(steps, np.round(steps)), x  # every output is a multiple of g


def test_secure_noise_has_the_laplace_distribution() -> None:
    """KS test against Lap(x, b) with the lattice of 2^-30·b invisible; false-positive rate 1e-6."""
    laplace = dpkit.mechanism("laplace", epsilon=0.5, sensitivity=2.0)
    out = laplace.randomize(np.full(20_000, 10.0), rng=dpkit.SecureRandom.from_key(KEY))
    assert stats.kstest(out, stats.laplace(loc=10.0, scale=4.0).cdf).pvalue > 1e-6


def low_bit_event(outputs: np.ndarray) -> int:
    """Outputs in (0, 2^-10) that are multiples of 2^-53: reachable from x = 1 (Sterbenz: 1 + n
    is exact), almost never from x = 0 (n itself carries bits far below 2^-53)."""
    window = (outputs > 0) & (outputs < 2.0**-10)
    scaled = outputs * 2.0**53
    return int(np.count_nonzero(window & (scaled == np.floor(scaled))))


def test_fast_float_laplace_leaks_through_low_bits() -> None:
    """Mironov-style: one event separates x = 0 from x = 1 far beyond e^ε (ε = 1).

    Expected counts are about 360 (x = 1) and about 1 (x = 0); the thresholds 200 and 20 are
    each many standard deviations away, so a false result has probability far below 1e-6."""
    laplace = dpkit.mechanism("laplace", epsilon=1.0)
    rng = np.random.default_rng(2012)
    n = 2_000_000
    from_one = low_bit_event(laplace.randomize(np.ones(n), rng=rng))
    from_zero = low_bit_event(laplace.randomize(np.zeros(n), rng=rng))
    assert from_one >= 200 and from_zero <= 20
    assert from_one / max(from_zero, 1) > math.e  # the float sampler is not 1-DP


def test_secure_laplace_has_no_such_event() -> None:
    """On the lattice the same event is just 'output in (0, 2^-10)': its frequencies for x = 0
    and x = 1 differ by about e^ε = e, as the mechanism allows (ratio bound 1.5e, ~6 sd)."""
    laplace = dpkit.mechanism("laplace", epsilon=1.0)
    rng = dpkit.SecureRandom.from_key(KEY)
    n = 2_000_000
    from_one = low_bit_event(laplace.randomize(np.ones(n), rng=rng))
    from_zero = low_bit_event(laplace.randomize(np.zeros(n), rng=rng))
    assert from_zero > 500 and from_one > 150
    assert from_zero / from_one < 1.5 * math.e


def test_too_large_answers_are_clamped_to_the_lattice_range() -> None:
    """No data-dependent error: the lattice index is clamped to 2^61 − 1 (1-Lipschitz)."""
    laplace = dpkit.mechanism("laplace", epsilon=1.0)
    out = laplace.randomize(np.array([1e30]))
    assert out[0] == pytest.approx(((1 << 61) - 1) * laplace.lattice_step(), rel=1e-6)


@pytest.mark.parametrize("epsilon", [0.1, 2.0**-33, 2.0**-30, 1.0])
@pytest.mark.parametrize("sensitivity", [1.0, 0.5, 0.3])
@pytest.mark.parametrize("coordinates", [1, 3])
def test_the_secure_lattice_spends_at_most_what_the_ledger_charges(
    epsilon: float, sensitivity: float, coordinates: int
) -> None:
    """The realised ε = (Δ₁/g + d)/t, Δ₁ at the larger of its readings (binary value, shortest
    decimal), ≤ ε as the ledger charges it (its shortest decimal, below the binary value for
    these ε; at 2⁻³³ and 2⁻³⁰, (Δ₁/g + d)/ε at the binary value is a multiple of 2⁻¹⁶, so rounding
    t up spares nothing there)."""
    laplace = dpkit.mechanism("laplace", epsilon=epsilon, sensitivity=sensitivity)
    g = Fraction(laplace.lattice_step())
    reach = max(Fraction(sensitivity), Fraction(repr(sensitivity)))
    realised = (reach / g + coordinates) / laplace.lattice_scale(coordinates)
    assert realised <= Fraction(repr(epsilon))
