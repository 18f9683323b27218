"""Privacy of the numeric local mechanisms, by their exact laws: no sampling here.

For each mechanism the declared law (``log_probability``, or the exact lattice law in secure
mode) is checked against an independent computation written in this file from the papers'
definitions, it is checked to normalise, and its worst density ratio over a grid of inputs
(the domain's ends included) and outputs is checked to be at most e^ε (ε at the smaller of
its two readings, the binary value and the shortest decimal the ledger charges). Duchi et al.'s vector
mechanism is enumerated in exact rationals for d ≤ 6, with the two classic mistakes shown to
fail. The secure lattices' cell probabilities are exact rationals: their ratio is compared with
e^ε in 60-digit decimal arithmetic. Deterministic: no false-positive rate.
"""

from __future__ import annotations

import decimal
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from dpkit_ldp._lattice import BandLattice, band_threshold
from dpkit_ldp.duchi import DuchiMulti, duchi_multi_bound
from dpkit_ldp.hybrid import EPSILON_STAR, hybrid_alpha, hybrid_variance
from dpkit_ldp.one_bit_mean import OneBitMean
from dpkit_ldp.piecewise import piecewise_lattice, piecewise_variance
from dpkit_ldp.sampled import PiecewiseMulti, optimal_k
from dpkit_ldp.square_wave import (
    bucket_probabilities,
    square_wave_half_width,
    square_wave_lattice,
    transition_matrix,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit
from dpkit.plugin import lie_threshold, share_epsilon
from dpkit.testing.exact import exact_check

EPSILONS = [1e-3, 0.1, 0.5, EPSILON_STAR, 1.0, 2.0, 4.0, 8.0, 30.0]
#: Where π = e^ε/(e^ε + 1) rounds to 1 in floating point, yet the secure samplers' thresholds
#: leave the other outcome a probability of a few 2⁻⁶⁴.
LARGE_EPSILONS = [44.0, 60.0, 300.0, 700.0]
TOLERANCE = 1e-9  # float rounding of log-densities


def _exp(epsilon: float) -> decimal.Decimal:
    """e^ε at the smaller of ε's two readings (binary value, shortest decimal: the ledger's),
    the one the exact thresholds are computed from."""
    reading = min(decimal.Decimal(epsilon), decimal.Decimal(repr(epsilon)))
    return decimal.Context(prec=60).exp(reading)


def _ratio_within(ratio: Fraction, epsilon: float) -> bool:
    """ratio ≤ e^ε, decided in 60-digit arithmetic (e^ε is irrational)."""
    context = decimal.Context(prec=60)
    value = context.divide(decimal.Decimal(ratio.numerator), decimal.Decimal(ratio.denominator))
    return value <= _exp(epsilon)


def _grid_inputs(mechanism: dpkit.plugin.Mechanism, count: int = 41) -> np.ndarray:
    return np.linspace(mechanism.lower, mechanism.upper, count)  # type: ignore[attr-defined]


def _worst_log_ratio(log_table: np.ndarray) -> float:
    """max over outputs (columns) of max − min over inputs (rows), ignoring outputs impossible
    under every input; inf if an output is possible under one input only."""
    finite = np.isfinite(log_table)
    possible = finite.any(axis=0)
    table = log_table[:, possible]
    if not np.isfinite(table).all():
        return math.inf
    return float(np.max(table.max(axis=0) - table.min(axis=0)))


# --- duchi (one value) ---------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_duchi_declared_law(epsilon: float) -> None:
    mech = dpkit.mechanism("duchi", epsilon=epsilon, lower=18.0, upper=90.0)
    x = _grid_inputs(mech)
    outputs = mech.output_space()
    table = np.array([mech.log_probability(outputs, np.full(2, v)) for v in x])
    np.testing.assert_allclose(np.exp(table).sum(axis=1), 1.0, rtol=1e-12)
    # Independently, in 60 digits: P[+B | x] = ((e^ε + 1) + (e^ε − 1)t)/(2(e^ε + 1)).
    context, odds = decimal.Context(prec=60), _exp(epsilon)
    for v, row in zip(x, table, strict=True):
        t = context.divide(decimal.Decimal(v) - 54, decimal.Decimal(36))
        plus = context.divide(odds + 1 + (odds - 1) * t, 2 * (odds + 1))
        assert math.exp(row[1]) == pytest.approx(float(plus), rel=1e-12)
        assert math.exp(row[0]) == pytest.approx(float(1 - plus), rel=1e-12)
    np.testing.assert_allclose(outputs, 54.0 + 36.0 * np.array([-1, 1]) / math.tanh(epsilon / 2))
    assert _worst_log_ratio(table) == pytest.approx(epsilon, rel=1e-9, abs=1e-12)  # tight


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_duchi_secure_law_is_exactly_within_epsilon(epsilon: float) -> None:
    """Secure mode: t rounded stochastically with u on the 2⁻⁵³ grid (P[up] = ⌈p·2⁵³⌉/2⁵³),
    then randomized response with the lie probability λ′ = lie_threshold/2⁶⁴ ≥ λ."""
    lie = Fraction(dpkit.plugin.lie_threshold(epsilon, 2), 1 << 64)
    plus = []  # P[+B | t] over a grid of t, ends included
    for t in np.linspace(-1.0, 1.0, 41):
        up = Fraction(math.ceil(Fraction((1.0 + t) / 2.0) * (1 << 53)), 1 << 53)
        plus.append(up * (1 - lie) + (1 - up) * lie)
    assert _ratio_within(max(plus) / min(plus), epsilon)  # output +B
    assert _ratio_within((1 - min(plus)) / (1 - max(plus)), epsilon)  # output −B


# --- duchi_multi: exact enumeration -----------------------------------------------------------


def _vertex_law(
    t: tuple[Fraction, ...],
    odds: Fraction,
    variant: str = "fitted",
    *,
    heads: Fraction | None = None,
) -> dict[tuple[int, ...], Fraction]:
    """P[z | t] (z ∈ {±1}^d, in units of B_d) by enumeration of v and z, exactly.

    ``variant``: "fitted" — heads with π_d = A e^ε/(A e^ε + A + b) (or ``heads``) onto
    T⁺ = {⟨z,v⟩ > 0}, tails onto T⁻ = {⟨z,v⟩ ≤ 0} (the mechanism); the mistakes: "strict" — the
    same split with π = e^ε/(e^ε + 1); "both" — T⁺ = {≥ 0}, T⁻ = {≤ 0} with π; "flip" — T⁺ =
    {≥ 0} sampled by negating a uniform z when ⟨z,v⟩ < 0 (weights 2 on > 0, 1 on = 0), T⁻ = −T⁺,
    with π.
    """
    d = len(t)
    cube = list(itertools.product((-1, 1), repeat=d))
    on_plane = math.comb(d, d // 2) if d % 2 == 0 else 0
    sides = (2**d - on_plane) // 2
    pi = odds / (1 + odds)
    if variant == "fitted":
        pi = sides * odds / (sides * odds + sides + on_plane) if heads is None else heads
    law = dict.fromkeys(cube, Fraction(0))
    for v in cube:
        weight = Fraction(1)
        for vj, tj in zip(v, t, strict=True):
            weight *= (1 + vj * tj) / 2
        if weight == 0:
            continue
        inner = {z: sum(a * b for a, b in zip(z, v, strict=True)) for z in cube}
        if variant == "flip":
            plus = {z: Fraction(2 if s > 0 else 1 if s == 0 else 0) for z, s in inner.items()}
            minus = {tuple(-c for c in z): w for z, w in plus.items()}
        elif variant == "both":
            plus = {z: Fraction(int(s >= 0)) for z, s in inner.items()}
            minus = {z: Fraction(int(s <= 0)) for z, s in inner.items()}
        else:
            plus = {z: Fraction(int(s > 0)) for z, s in inner.items()}
            minus = {z: Fraction(int(s <= 0)) for z, s in inner.items()}
        total_plus, total_minus = sum(plus.values()), sum(minus.values())
        for z in cube:
            law[z] += weight * (pi * plus[z] / total_plus + (1 - pi) * minus[z] / total_minus)
    return law


def _corner_inputs(d: int) -> list[tuple[Fraction, ...]]:
    corners = [
        tuple(Fraction(c) for c in corner) for corner in itertools.product((-1, 1), repeat=d)
    ]
    inner = [tuple(Fraction(j - d, 2 * d + 1) for j in range(d)), tuple([Fraction(0)] * d)]
    return corners + inner


@pytest.mark.parametrize(
    ("d", "odds"),
    [(d, odds) for d in range(1, 6) for odds in (Fraction(3), Fraction(7, 2))] + [(6, Fraction(3))],
)
def test_duchi_multi_by_exact_enumeration(d: int, odds: Fraction) -> None:
    """The law normalises, is unbiased with the code's B_d, and its worst ratio is e^ε exactly."""
    epsilon = math.log(odds)
    laws = [(t, _vertex_law(t, odds)) for t in _corner_inputs(d)]
    # E[z_1 | v = (1, ..., 1)] per unit of B_d: the constant c with c·B_d = 1.
    ones = tuple([Fraction(1)] * d)
    c = sum(z[0] * p for z, p in _vertex_law(ones, odds).items())
    assert float(c) * duchi_multi_bound(epsilon, d) == pytest.approx(1.0, rel=1e-12)
    if d % 2:  # odd d: DJW's constant (e^ε + 1)/(e^ε − 1)·2^{d−1}/C(d − 1, (d − 1)/2)
        djw = (float(odds) + 1) / (float(odds) - 1) * 2 ** (d - 1) / math.comb(d - 1, (d - 1) // 2)
        assert float(1 / c) == pytest.approx(djw, rel=1e-12)
    for t, law in laws:
        assert sum(law.values()) == 1
        for j in range(d):  # unbiased: E[z_j]/c = t_j exactly
            assert sum(z[j] * p for z, p in law.items()) / c == t[j]
    worst = max(
        law_a[z] / law_b[z]
        for (_, law_a), (_, law_b) in itertools.permutations(laws, 2)
        for z in law_a
    )
    assert worst == odds  # ε-LDP, and tight at opposite corners


@pytest.mark.parametrize("epsilon", [1e-3, 1.0, *LARGE_EPSILONS])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_duchi_multi_declares_the_secure_samplers_law_at_every_epsilon(
    epsilon: float, d: int
) -> None:
    """The declared law is the one the secure sampler draws, heads with T/2⁶⁴ (T = ⌊π_d·2⁶⁴⌋,
    in 60 digits): every vertex keeps its probability ≥ 2⁻⁶⁴/(A + b) where π_d rounds to 1 in
    floating point, the exact worst ratio of that law is ≤ e^ε, and so is the declared one's
    (and the exact audit tier's)."""
    mech = DuchiMulti(epsilon=epsilon, dimension=d, lower=0.0, upper=10.0)
    on_plane = math.comb(d, d // 2) if d % 2 == 0 else 0
    sides = (2**d - on_plane) // 2
    heads = Fraction(band_threshold(epsilon, 2 * sides + on_plane, sides), 1 << 64)
    outputs = mech.output_space()
    signs = np.sign(mech.from_data(outputs)).astype(int)
    laws, table = [], []
    for t in _corner_inputs(d):
        law = _vertex_law(t, Fraction(0), heads=heads)
        x = 5.0 + 5.0 * np.array([float(v) for v in t])
        declared = mech.log_probability(outputs, np.tile(x, (len(outputs), 1)))
        assert np.isfinite(declared).all()
        expected = [float(law[tuple(s)]) for s in signs]
        np.testing.assert_allclose(np.exp(declared), expected, rtol=1e-12)
        laws.append(law)
        table.append(declared)
    worst = max(a[z] / b[z] for a, b in itertools.permutations(laws, 2) for z in a)
    assert _ratio_within(worst, epsilon)
    assert _worst_log_ratio(np.array(table)) <= epsilon + TOLERANCE
    if epsilon > 40:  # the exact tier: a finite loss within the claim
        result = exact_check(mech)
        assert result.checked and not result.violation and result.epsilon <= epsilon


@pytest.mark.parametrize("epsilon", [1e-3, 1.0, *LARGE_EPSILONS])
@pytest.mark.parametrize("intervals", [1, 3])
def test_one_bit_mean_declares_the_secure_thresholds_at_every_epsilon(
    epsilon: float, intervals: int
) -> None:
    """P[b = 1 | z] = (T_0 + z·s·D)/2⁶⁴ (T_0 = lie_threshold(ε, 2), D = ⌊(2⁶⁴ − 2T_0)/s⌋), the
    bit's law over the rounding offset: declared for both bits to 1e-12 relative, finite where
    P[b = 0] is a few 2⁻⁶⁴ (ε ≳ 37), and its worst ratio ≤ e^ε exactly and as declared."""
    mech = OneBitMean(epsilon=epsilon, lower=0.0, upper=1.0, intervals=intervals)
    low = lie_threshold(epsilon, 2)
    step = ((1 << 64) - 2 * low) // intervals
    grid = [Fraction(k, 8) for k in range(9)]  # z, exact doubles, the ends included
    ones = [Fraction(low + z * intervals * step, 1 << 64) for z in grid]
    declared = mech.log_probability(
        np.array([0, 1], dtype=np.uint8), np.array([float(z) for z in grid])[:, None]
    )
    assert np.isfinite(declared).all()
    expected = np.array([[float(1 - one), float(one)] for one in ones])
    np.testing.assert_allclose(np.exp(declared), expected, rtol=1e-12)
    assert _ratio_within(max(ones) / min(ones), epsilon)
    assert _ratio_within((1 - min(ones)) / (1 - max(ones)), epsilon)
    assert _worst_log_ratio(declared) <= epsilon + TOLERANCE
    if epsilon > 40:  # the exact tier: a finite loss within the claim
        result = exact_check(mech)
        assert result.checked and not result.violation and result.epsilon <= epsilon


@pytest.mark.parametrize("d", [2, 4])
def test_duchi_multi_classic_mistakes_fail_for_even_d(d: int) -> None:
    """The three mistakes of the module docstring: two exceed e^ε, the third is biased."""
    odds = Fraction(3)
    inputs = _corner_inputs(d)
    for variant in ("strict", "both"):
        laws = [_vertex_law(t, odds, variant) for t in inputs]
        worst = max(a[z] / b[z] for a, b in itertools.permutations(laws, 2) for z in a)
        assert worst > odds, variant
    ones = tuple([Fraction(1)] * d)
    flip = _vertex_law(ones, odds, "flip")
    assert float(sum(z[0] * p for z, p in flip.items())) * duchi_multi_bound(
        math.log(3), d
    ) != pytest.approx(1.0, rel=1e-6)  # E[z_1]·B_d ≠ 1: biased


@pytest.mark.parametrize("d", [1, 3, 4])
def test_duchi_multi_declared_log_probability_matches_enumeration(d: int) -> None:
    epsilon = math.log(3.0)
    mech = DuchiMulti(epsilon=epsilon, dimension=d, lower=0.0, upper=10.0)
    outputs = mech.output_space()
    signs = np.sign(mech.from_data(outputs)).astype(int)
    for t in _corner_inputs(d):
        law = _vertex_law(t, Fraction(3))
        x = 5.0 + 5.0 * np.array([float(v) for v in t])
        declared = np.exp(mech.log_probability(outputs, np.tile(x, (len(outputs), 1))))
        expected = [float(law[tuple(s)]) for s in signs]
        np.testing.assert_allclose(declared, expected, rtol=1e-10)
    off_vertex = outputs[0].copy()
    off_vertex[0] += 0.5
    assert mech.log_probability(off_vertex, np.full(d, 5.0)) == -np.inf


# --- pm: the continuous law --------------------------------------------------------------------


def _pm_density(y: np.ndarray, t: float, epsilon: float) -> np.ndarray:
    """Wang et al. 2019, Algorithm 2, written out: p on [l, r], p/e^ε on the rest of [−C, C]."""
    z = math.exp(epsilon / 2)
    c = (z + 1) / (z - 1)
    left = (c + 1) / 2 * t - (c - 1) / 2
    right = left + c - 1
    p = (math.exp(epsilon) - z) / (2 * z + 2)
    inside = (y >= left) & (y <= right)
    return np.where(np.abs(y) <= c, np.where(inside, p, p / math.exp(epsilon)), 0.0)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_pm_declared_density(epsilon: float) -> None:
    from scipy import integrate

    mech = dpkit.mechanism("pm", epsilon=epsilon)
    c = mech.bound
    x = _grid_inputs(mech)
    outputs = np.linspace(-c * 1.01, c * 1.01, 4001)
    table = np.array([mech.log_probability(outputs, np.full(outputs.size, v)) for v in x])
    assert _worst_log_ratio(table) <= epsilon + TOLERANCE
    for t in (-1.0, -0.3, 0.0, 0.8, 1.0):
        expected = _pm_density(outputs, t, epsilon)
        with np.errstate(divide="ignore"):
            np.testing.assert_allclose(
                mech.log_probability(outputs, np.full(outputs.size, t)), np.log(expected), rtol=1e-9
            )
        if epsilon < 0.5:
            continue  # C is large: the quadrature below is checked at moderate ε
        left = (c + 1) / 2 * t - (c - 1) / 2
        pieces = [(-c, left), (left, left + c - 1), (left + c - 1, c)]

        def moment(k: int, t: float = t, pieces: list[tuple[float, float]] = pieces) -> float:
            """E[(y − t)^k] by quadrature over the three pieces."""
            return sum(
                integrate.quad(lambda y: (y - t) ** k * _pm_density(np.array(y), t, epsilon), a, b)[
                    0
                ]
                for a, b in pieces
                if b > a
            )

        assert moment(0) == pytest.approx(1.0, abs=1e-9)
        assert moment(1) == pytest.approx(0.0, abs=1e-9)  # unbiased
        variance = moment(2)
        assert variance == pytest.approx(float(piecewise_variance(t, epsilon)), rel=1e-8)


# --- pm: the secure lattice --------------------------------------------------------------------


def _lattice_law(epsilon: float, exponent: int, t: Fraction) -> list[Fraction]:
    """The exact pmf over cells of the lattice, for a rational t, written from its definition:
    a band of H cells at start s with probability a each, b elsewhere, s the stochastic rounding
    of K − H/2 + t·D (with the exact weight frac)."""
    lattice = piecewise_lattice(epsilon, exponent)
    band = lattice.lattice
    a, b = (
        Fraction(band.threshold, band.band << 64),
        Fraction((1 << 64) - band.threshold, (band.cells - band.band) << 64),
    )
    position = lattice.centre + t * lattice.stretch
    floor = math.floor(position)
    law = [Fraction(0)] * band.cells
    for start, weight in ((floor, 1 - (position - floor)), (floor + 1, position - floor)):
        if weight == 0:
            continue
        for m in range(band.cells):
            law[m] += weight * (a if start <= m < start + band.band else b)
    return law


@pytest.mark.parametrize(("epsilon", "exponent"), [(0.5, -1), (1.0, -3), (2.0, -4), (6.0, -5)])
def test_pm_lattice_exact_law(epsilon: float, exponent: int) -> None:
    """On a coarse lattice, every cell's probability for every input lies in [b, a] with
    a/b ≤ e^ε; the law sums to 1 and its mean is t exactly; the closed-form variance is the
    enumerated one."""
    lattice = piecewise_lattice(epsilon, exponent)
    g, k = lattice.step, lattice.half_cells
    assert lattice.stretch <= lattice.centre  # every start within [0, N − H]
    values = [(m - k + Fraction(1, 2)) * g for m in range(lattice.lattice.cells)]
    inputs = [Fraction(j, 8) for j in range(-8, 9)] + [Fraction(1, 3), Fraction(-5, 7)]
    laws = [_lattice_law(epsilon, exponent, t) for t in inputs]
    for t, law in zip(inputs, laws, strict=True):
        assert sum(law) == 1
        assert sum(p * y for p, y in zip(law, values, strict=True)) == t
        second = sum(p * y * y for p, y in zip(law, values, strict=True))
        assert lattice.variance(t) == second - t * t
    worst = max(max(col) / min(col) for col in zip(*laws, strict=True))
    assert _ratio_within(worst, epsilon)
    assert worst > 1  # the law does move with the input


@pytest.mark.parametrize(
    "epsilon", [1e-12, 1e-6, 0.05, 0.5, 1.0, 2.0, 6.0, 30.0, 45.0, 60.0, 100.0, 700.0]
)
def test_pm_secure_lattice_parameters(epsilon: float) -> None:
    """The lattice actually used: a/b ≤ e^ε exactly, every start reachable, and its variance
    within a relative 1e-8 of the continuous formula up to ε = 45 and 1e-6 at ε = 60 (the
    discretisation's cost; measured: ≤ 3e-9 up to 45, 7e-7 at 60, 1.3e-3 at 70)."""
    lattice = piecewise_lattice(epsilon)
    band = lattice.lattice
    assert _ratio_within(band.high / band.low, epsilon)
    assert lattice.stretch <= lattice.centre
    assert band.high * band.band + band.low * (band.cells - band.band) == 1
    assert band.cells < 1 << 62
    if 0.05 <= epsilon <= 60:
        for t in (Fraction(0), Fraction(1, 2), Fraction(1)):
            continuous = float(piecewise_variance(float(t), epsilon))
            tolerance = 1e-8 if epsilon <= 45 else 1e-6
            assert float(lattice.variance(t)) == pytest.approx(continuous, rel=tolerance)


@pytest.mark.parametrize("epsilon", [1e-9, 0.3, 1.0, 5.0, 40.0, 700.0])
@pytest.mark.parametrize(("cells", "band"), [(2, 1), (7, 3), (1 << 33, 12345), ((1 << 41) + 5, 1)])
def test_band_threshold_rounds_down(epsilon: float, cells: int, band: int) -> None:
    lattice = BandLattice.build(epsilon, cells, band)
    assert lattice.threshold == band_threshold(epsilon, cells, band)
    assert _ratio_within(lattice.high / lattice.low, epsilon)
    if lattice.threshold + 1 < 1 << 64:  # T is the largest such integer: T + 1 would exceed e^ε
        bigger = Fraction(lattice.threshold + 1, band << 64) / Fraction(
            (1 << 64) - lattice.threshold - 1, (cells - band) << 64
        )
        assert not _ratio_within(bigger, epsilon)


# --- hm ---------------------------------------------------------------------------------------


def test_epsilon_star_is_wang_et_al_closed_form() -> None:
    root = math.sqrt(241)
    closed = math.log(
        (-5 + 2 * (6353 - 405 * root) ** (1 / 3) + 2 * (6353 + 405 * root) ** (1 / 3)) / 27
    )
    assert pytest.approx(closed, rel=1e-12) == EPSILON_STAR
    # The defining property: at ε*, PM's variance at t = 0 equals Duchi et al.'s worst case.
    z = math.exp(EPSILON_STAR / 2)
    assert (z + 3) / (3 * (z - 1) ** 2) == pytest.approx(((z * z + 1) / (z * z - 1)) ** 2)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_hm_mixture_law(epsilon: float) -> None:
    """The atoms at ±B and the density part each have ratio ≤ e^ε; the variance is the mixture's,
    constant in t above ε*, and never above PM's or Duchi's worst case."""
    hm = dpkit.mechanism("hm", epsilon=epsilon)
    duchi = dpkit.mechanism("duchi", epsilon=epsilon)
    pm = dpkit.mechanism("pm", epsilon=epsilon)
    alpha = hm.alpha
    x = _grid_inputs(hm)
    atoms = np.array([duchi.log_probability(duchi.output_space(), np.full(2, v)) for v in x])
    assert _worst_log_ratio(np.log1p(-alpha) + atoms) <= epsilon + TOLERANCE
    if alpha > 0:
        outputs = np.linspace(-pm.bound, pm.bound, 2001)
        density = np.array([pm.log_probability(outputs, np.full(outputs.size, v)) for v in x])
        assert _worst_log_ratio(math.log(alpha) + density) <= epsilon + TOLERANCE
    t = np.linspace(-1, 1, 21)
    b2 = (1 / math.tanh(epsilon / 2)) ** 2
    expected = alpha * piecewise_variance(t, epsilon) + (1 - alpha) * (b2 - t * t)
    np.testing.assert_allclose(hybrid_variance(t, epsilon), expected, rtol=1e-12)
    if epsilon > EPSILON_STAR:
        assert alpha == pytest.approx(1 - math.exp(-epsilon / 2))
        z = math.exp(epsilon / 2)
        constant = (z + 3) / (3 * z * (z - 1)) + (z * z + 1) ** 2 / (z * (z * z - 1) ** 2)
        np.testing.assert_allclose(hybrid_variance(t, epsilon), constant, rtol=1e-9)
    else:
        assert alpha == 0
    worst = hm.worst_case_variance()[0]
    assert worst <= min(pm.worst_case_variance()[0], duchi.worst_case_variance()[0]) * (1 + 1e-12)
    assert hybrid_alpha(epsilon) == alpha


# --- pm_multi ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "d", "k"), [(1.0, 3, None), (8.0, 4, None), (6.0, 5, 2)])
def test_pm_multi_density_ratio(epsilon: float, d: int, k: int | None) -> None:
    mech = PiecewiseMulti(epsilon=epsilon, dimension=d, k=k)
    chosen = mech.sampled
    assert chosen == (k if k is not None else optimal_k(epsilon, d))
    rng = np.random.default_rng(3)
    # Outputs with the first `chosen` attributes drawn, values across their whole range.
    inputs = np.vstack([np.full(d, -1.0), np.full(d, 1.0), rng.uniform(-1, 1, (6, d))])
    c = 1 / math.tanh(epsilon / chosen / 4) * d / chosen
    grid = np.linspace(-0.999 * c, 0.999 * c, 300)  # even count: no 0 (an attribute not drawn)
    outputs = np.zeros((grid.size, d))
    outputs[:, :chosen] = grid[:, None]
    outputs[:, 0] = grid[::-1]
    table = np.array([mech.log_probability(outputs, np.tile(v, (grid.size, 1))) for v in inputs])
    assert _worst_log_ratio(table) <= epsilon + TOLERANCE
    # Independently: the product of PM densities at ε/k, scaled by k/d, over C(d, k) subsets.
    t = inputs[0]
    y = outputs[:, :chosen] * chosen / d
    product = np.prod([_pm_density(y[:, j], t[j], epsilon / chosen) for j in range(chosen)], axis=0)
    expected = product * (chosen / d) ** chosen / math.comb(d, chosen)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(table[0], np.log(expected), rtol=1e-9)
    assert mech.log_probability(np.zeros(d), np.zeros(d)) == -np.inf  # no attribute drawn


# --- sw --------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_sw_declared_density(epsilon: float) -> None:
    mech = dpkit.mechanism("sw", epsilon=epsilon, lower=10.0, upper=20.0)
    b = mech.half_width
    # b of Li et al. 2020 with e^ε as an exact rational (its Taylor series to 60 terms): no
    # cancellation, and independent of the decimal arithmetic of the code.
    if epsilon <= 8:
        eps = Fraction(epsilon)
        odds = sum((eps**j / math.factorial(j) for j in range(60)), Fraction(0))
        exact = (eps * odds - odds + 1) / (2 * odds * (odds - 1 - eps))
        assert b == pytest.approx(float(exact), rel=1e-12)
    else:
        e = math.exp(epsilon)
        assert b == pytest.approx((epsilon * e - e + 1) / (2 * e * (e - 1 - epsilon)), rel=1e-9)
    p, q = mech.densities
    assert p / q == pytest.approx(math.exp(epsilon), rel=1e-12)
    assert p * 2 * b + q == pytest.approx(1.0, rel=1e-12)
    x = _grid_inputs(mech)
    outputs = np.linspace(10 - 10 * b * 1.01, 20 + 10 * b * 1.01, 3001)
    table = np.array([mech.log_probability(outputs, np.full(outputs.size, v)) for v in x])
    assert _worst_log_ratio(table) <= epsilon + TOLERANCE


@pytest.mark.parametrize("epsilon", [1e-12, 0.5, 1.0, 3.0, 20.0, 40.0, 700.0])
def test_sw_secure_lattice(epsilon: float) -> None:
    secure = square_wave_lattice(epsilon)
    lattice = secure.lattice
    assert _ratio_within(lattice.high / lattice.low, epsilon)
    assert lattice.cells - lattice.band == secure.per_unit  # every start v·M, v ∈ [0, 1]
    assert lattice.cells < 1 << 62
    b = square_wave_half_width(epsilon)
    if epsilon <= 40:  # the band's half-width Hg/2 is b to a relative 2⁻³⁰ (or half a cell)
        assert abs(lattice.band / secure.per_unit / 2 - b) <= max(b * 2**-29, 0.5 / secure.per_unit)


@pytest.mark.parametrize(("epsilon", "bins"), [(0.5, 8), (2.0, 16), (6.0, 5)])
def test_sw_transition_matrix_by_quadrature(epsilon: float, bins: int) -> None:
    """M[j, i] = mean over v in input bucket i of P[report in bucket j | v], by numerical
    integration of the bucket probabilities."""
    from scipy import integrate

    matrix = transition_matrix(epsilon, bins)
    np.testing.assert_allclose(matrix.sum(axis=0), 1.0, rtol=1e-12)
    b = square_wave_half_width(epsilon)
    report_edges = np.linspace(-b, 1 + b, bins + 1)
    for i in range(bins):
        lo, hi = i / bins, (i + 1) / bins
        kinks = sorted({e + s for e in report_edges for s in (-b, b) if lo < e + s < hi})
        for j in range(bins):
            value = integrate.quad(
                lambda v, j=j: bucket_probabilities(epsilon, bins, [v])[0, j],
                lo,
                hi,
                points=kinks or None,
                epsabs=1e-14,
                limit=200,
            )[0]
            assert matrix[j, i] == pytest.approx(value * bins, abs=1e-10)


@pytest.mark.parametrize("name", ["pm_multi", "hm_multi", "multibit"])
@pytest.mark.parametrize(("epsilon", "k"), [(5.0, 3), (10.0, 3), (1.0, 5)])
def test_multi_secure_parts_compose_within_epsilon(
    name: str, epsilon: float, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ε each drawn attribute is released at, composed over the k attributes, is at most ε
    exactly. ε/k in floating point lies above the true quotient here: secure pm_multi at
    ε = 5, k = 3 then realised 5 + 2.2e-16 (its lattice realises the quotient itself)."""
    mech = dpkit.mechanism(name, epsilon=epsilon, dimension=k, k=k)
    seen: list[float] = []
    one = type(mech)._one

    def spy(t: np.ndarray, part: float, generator: object) -> np.ndarray:
        seen.append(part)
        return one(t, part, generator)

    monkeypatch.setattr(type(mech), "_one", staticmethod(spy))
    mech.randomize(np.zeros((2, k)), rng=dpkit.SecureRandom.from_key(bytes(32)))
    assert seen == [mech.attribute_epsilon]
    assert Fraction(seen[0]) * k <= Fraction(epsilon)
    if name == "pm_multi":  # the lattice actually drawn from, composed k times
        band = piecewise_lattice(seen[0]).lattice
        context = decimal.Context(prec=60)
        ratio = band.high / band.low
        log_ratio = context.ln(
            context.divide(decimal.Decimal(ratio.numerator), decimal.Decimal(ratio.denominator))
        )
        assert context.multiply(log_ratio, k) <= decimal.Decimal(epsilon)


@settings(max_examples=200, derandomize=True, deadline=None, database=None)
@given(
    epsilon=st.floats(min_value=1e-12, max_value=700.0),
    k=st.integers(min_value=1, max_value=1 << 12),
)
def test_share_epsilon_is_the_largest_exact_share(epsilon: float, k: int) -> None:
    """k shares of ε never exceed ε exactly (at its smaller reading, as the ledger charges),
    and the next double up would (or is ε/k's own rounding): pm_multi's and hm_multi's share
    per attribute, a table quantile's per group."""
    share = share_epsilon(epsilon, k)
    charged = min(Fraction(epsilon), Fraction(repr(epsilon)))  # the ledger's reading, or less
    assert Fraction(share) * k <= charged
    assert share == epsilon / k or Fraction(math.nextafter(share, math.inf)) * k > charged


def test_band_threshold_refuses_a_band_its_grid_cannot_realise() -> None:
    """The piecewise lattice at ε = 2.03e-19 (N, H below): T rounded down fell below the
    uniform point, and b/a = e^{3.3e-19} passed e^ε. Refused; and one step up in ε, where the
    grid keeps both ratios, the band's two levels stay within e^ε both ways."""
    cells, band = 12062741310, 574033852
    with pytest.raises(ValueError, match="too small"):
        band_threshold(2.0280218898066212e-19, cells, band)
    for epsilon in (1e-16, 1e-12):
        lattice = BandLattice.build(epsilon, cells, band)
        assert _ratio_within(lattice.high / lattice.low, epsilon)
        assert _ratio_within(lattice.low / lattice.high, epsilon)
