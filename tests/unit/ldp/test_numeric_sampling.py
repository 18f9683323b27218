"""The numeric samplers draw from their declared laws, in fast and secure mode.

Each check compares reports of one input with the law written in this file from the papers
(Duchi et al.'s two points, the piecewise and square-wave densities; for vectors the declared
``log_probability``, itself checked against exact enumeration in test_ldp_numeric_privacy.py):
a binomial test for two-point laws, a Kolmogorov–Smirnov test for continuous laws (secure mode's
lattice law is within 2⁻²⁹ of the continuous one in distribution, far below what 10⁵ samples
resolve; for a distribution with atoms the test is conservative), and a χ² test on finite
outputs. Every check rejects at p < 1e-8 (CHECK_ALPHA) and no test makes more than 12 checks,
so a correct sampler fails a test with probability < 1.2·10⁻⁷. Seeds are fixed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from dpkit_ldp.sampled import choose_attributes
from scipy import stats

import dpkit

CHECK_ALPHA = 1e-8
N = 100_000
MODES: dict[str, Callable[[], Any]] = {
    "fast": lambda: np.random.default_rng(20261122),
    "secure": lambda: dpkit.SecureRandom.from_key(bytes(range(32))),
}


def _pm_cdf(epsilon: float, t: float) -> Callable[[np.ndarray], np.ndarray]:
    """CDF of Wang et al.'s piecewise density (p on [l, r], p/e^ε elsewhere on [−C, C])."""
    z = math.exp(epsilon / 2)
    c = (z + 1) / (z - 1)
    left = (c + 1) / 2 * t - (c - 1) / 2
    right = left + c - 1
    high = (math.exp(epsilon) - z) / (2 * z + 2)
    low = high / math.exp(epsilon)

    def cdf(y: np.ndarray) -> np.ndarray:
        y = np.clip(y, -c, c)
        below = low * (np.minimum(y, left) + c)
        band = high * np.clip(y - left, 0, right - left)
        above = low * np.clip(y - right, 0, None)
        return below + band + above

    return cdf


def _sw_cdf(epsilon: float, v: float) -> Callable[[np.ndarray], np.ndarray]:
    """CDF of Li et al.'s square wave (p on [v − b, v + b], q elsewhere on [−b, 1 + b])."""
    e = math.exp(epsilon)
    b = (epsilon * e - e + 1) / (2 * e * (e - 1 - epsilon))
    p, q = e / (2 * b * e + 1), 1 / (2 * b * e + 1)

    def cdf(y: np.ndarray) -> np.ndarray:
        y = np.clip(y, -b, 1 + b)
        band = np.clip(y - (v - b), 0, 2 * b)
        return q * (y + b - band) + p * band

    return cdf


def _ks(sample: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray]) -> float:
    return float(stats.kstest(sample, cdf).pvalue)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("epsilon", [0.5, 3.0])
def test_duchi_two_point_law(mode: str, epsilon: float) -> None:
    mech = dpkit.mechanism("duchi", epsilon=epsilon, lower=0.0, upper=100.0)
    rng = MODES[mode]()
    low, high = mech.output_space()
    for x in (0.0, 30.0, 50.0, 85.0, 100.0):
        reports = mech.randomize(np.full(N, x), rng=rng)
        assert set(np.unique(reports)) <= {low, high}
        t = (x - 50.0) / 50.0
        expected = ((math.exp(epsilon) + 1) + math.expm1(epsilon) * t) / (
            2 * (math.exp(epsilon) + 1)
        )
        plus = int(np.count_nonzero(reports == high))
        assert stats.binomtest(plus, N, expected).pvalue > CHECK_ALPHA, (x, plus / N, expected)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 8.0])
def test_pm_density(mode: str, epsilon: float) -> None:
    mech = dpkit.mechanism("pm", epsilon=epsilon, lower=-1.0, upper=1.0)
    rng = MODES[mode]()
    for t in (-1.0, 0.0, 0.6, 1.0):
        reports = mech.randomize(np.full(N, t), rng=rng)
        assert _ks(reports, _pm_cdf(epsilon, t)) > CHECK_ALPHA, t


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 4.0])
def test_hm_mixture(mode: str, epsilon: float) -> None:
    """The Duchi branch's share and signs (binomial), the piecewise branch's density (KS)."""
    mech = dpkit.mechanism("hm", epsilon=epsilon)
    duchi = dpkit.mechanism("duchi", epsilon=epsilon)
    low, high = duchi.output_space()
    rng = MODES[mode]()
    for t in (-1.0, 0.25, 1.0):
        reports = mech.randomize(np.full(N, t), rng=rng)
        atoms = (reports == low) | (reports == high)
        count = int(np.count_nonzero(atoms))
        assert stats.binomtest(count, N, 1 - mech.alpha).pvalue > CHECK_ALPHA
        plus = int(np.count_nonzero(reports == high))
        expected = float(np.exp(duchi.log_probability(high, t)))
        assert stats.binomtest(plus, count, expected).pvalue > CHECK_ALPHA
        if mech.alpha > 0:
            assert _ks(reports[~atoms], _pm_cdf(epsilon, t)) > CHECK_ALPHA


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 6.0])
def test_sw_density(mode: str, epsilon: float) -> None:
    mech = dpkit.mechanism("sw", epsilon=epsilon, lower=0.0, upper=1.0)
    rng = MODES[mode]()
    for v in (0.0, 0.3, 1.0):
        reports = mech.randomize(np.full(N, v), rng=rng)
        assert _ks(reports, _sw_cdf(epsilon, v)) > CHECK_ALPHA, v


def _chi_square(observed: np.ndarray, expected: np.ndarray) -> float:
    return float(stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize(("d", "epsilon"), [(3, 1.0), (4, 1.0), (4, 3.0)])
def test_duchi_multi_vertex_law(mode: str, d: int, epsilon: float) -> None:
    """χ² over the 2^d vertices against the declared law, at a corner, the centre and inside."""
    mech = dpkit.mechanism("duchi_multi", epsilon=epsilon, dimension=d)
    rng = MODES[mode]()
    vertices = mech.output_space()
    for x in (np.ones(d), np.zeros(d), np.linspace(-0.8, 0.6, d)):
        reports = mech.randomize(np.tile(x, (N, 1)), rng=rng)
        index = ((reports > 0).astype(int) * (1 << np.arange(d)[::-1])).sum(axis=1)
        observed = np.bincount(index, minlength=1 << d)
        expected = np.exp(mech.log_probability(vertices, np.tile(x, (len(vertices), 1))))
        assert _chi_square(observed, expected) > CHECK_ALPHA, x


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize(("d", "k"), [(4, 2), (5, 3), (3, 1)])
def test_attributes_are_uniform_ordered_subsets(mode: str, d: int, k: int) -> None:
    rng = MODES[mode]()
    chosen = choose_attributes(dpkit.plugin.resolve_rng(rng)[0], N, d, k)
    assert np.all(np.sort(chosen, axis=1)[:, 1:] != np.sort(chosen, axis=1)[:, :-1])
    tuples = list(itertools.permutations(range(d), k))
    code = {t: i for i, t in enumerate(tuples)}
    observed = np.bincount([code[tuple(row)] for row in chosen.tolist()], minlength=len(tuples))
    assert _chi_square(observed, np.ones(len(tuples))) > CHECK_ALPHA


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", ["pm_multi", "hm_multi"])
def test_sampled_attributes_report_the_one_dimensional_law(mode: str, name: str) -> None:
    """k = 2 of d = 4 attributes (ε = 6): the drawn set is uniform and a drawn attribute's report
    times k/d follows the piecewise law at ε/k (for hm_multi at ε/k = 3 > ε*, its PM branch)."""
    d, epsilon = 4, 6.0
    mech = dpkit.mechanism(name, epsilon=epsilon, dimension=d)
    k = mech.sampled
    assert k == 2
    rng = MODES[mode]()
    x = np.array([-1.0, -0.2, 0.5, 1.0])
    reports = mech.randomize(np.tile(x, (N, 1)), rng=rng)
    drawn = reports != 0.0
    assert np.all(drawn.sum(axis=1) == k)
    subsets = list(itertools.combinations(range(d), k))
    code = {s: i for i, s in enumerate(subsets)}
    observed = np.bincount(
        [code[tuple(np.flatnonzero(row))] for row in drawn], minlength=len(subsets)
    )
    assert _chi_square(observed, np.ones(len(subsets))) > CHECK_ALPHA
    for j in (0, 2):
        values = reports[drawn[:, j], j] * k / d
        if name == "hm_multi":
            bound = 1 / math.tanh(epsilon / k / 2)
            values = values[np.abs(np.abs(values) - bound) > 1e-12]  # drop the Duchi atoms
        assert _ks(values, _pm_cdf(epsilon / k, x[j])) > CHECK_ALPHA


def test_the_vertex_check_catches_a_biased_tails_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    """Show the χ² check has teeth: drawing T⁻ by negating a uniform vertex only (no acceptance
    coin for even d, so the orthogonal vertices get half the weight) fails it."""
    from dpkit_ldp import duchi

    def flip_only(generator: Any, n: int, d: int, *, strict: bool) -> np.ndarray:
        w = duchi._signs(generator, n, d)
        w[w.sum(axis=1) < 0] *= -1
        return w

    monkeypatch.setattr(duchi, "_side_signs", flip_only)
    mech = dpkit.mechanism("duchi_multi", epsilon=1.0, dimension=4)
    x = np.ones(4)  # a corner: v is fixed, so the law of w shows (at the centre z is uniform)
    reports = mech.randomize(np.tile(x, (N, 1)), rng=np.random.default_rng(5))
    index = ((reports > 0).astype(int) * (1 << np.arange(4)[::-1])).sum(axis=1)
    expected = np.exp(mech.log_probability(mech.output_space(), np.tile(x, (16, 1))))
    assert _chi_square(np.bincount(index, minlength=16), expected) < CHECK_ALPHA
