"""Calibration at the corners that used to be slow: tiny δ, a tiny target ε, many steps.

Each answer is checked against a computation that does not use dpkit's accountant:

* ``tests/data/calibration_vectors.json`` (``make_calibration_vectors.py``, dp-accounting 0.6.0
  in its own environment): the parameter that truly meets the target lies in [lower, upper],
  ``upper`` from dp-accounting's pessimistic PLD calibration and ``lower`` where its optimistic
  PLD is still above the target. dpkit's noise must be at least ``lower`` (valid) and at most
  ``upper`` plus 0.1 % (as tight as dp-accounting). The optimistic PLD rounds every step's
  loss down by up to its grid (1e-4), so after 10 000 steps it can be 1 below the truth: some
  cases have no ``lower`` within 10 % (the file says ``null``), and validity rests there on
  the reference vectors of ``account`` (``test_accounting_reference_vectors.py``);
* the target ε = 1e-9 at δ = 1e-5 (ε ≈ 0: the σ at which the total variation distance δ(0) of
  the composition is δ) against the normal law with the exact mean and variance of each
  step's privacy loss (Gauss–Hermite quadrature); its skewness is μ/√k ≈ 3e-7, so it gives
  δ(0) to far better than the 0.1 % checked here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit.accounting import calibrate, compose_pld
from dpkit.privacy import GaussianDP, SubsampledDP

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "calibration_vectors.json").read_text()
)


def _id(case: dict[str, Any]) -> str:
    keys = ("sampling_rate", "count", "delta", "target_epsilon")
    return case["kind"] + "-" + "-".join(f"{case[k]:g}" for k in keys if k in case)


def test_the_file_says_how_it_was_made() -> None:
    assert VECTORS["versions"]["dp-accounting"] == "0.6.0"
    assert VECTORS["generated_by"].endswith("make_calibration_vectors.py") and VECTORS["date"]
    assert len(VECTORS["cases"]) >= 4


@pytest.mark.parametrize("case", VECTORS["cases"], ids=_id)
def test_calibration_is_between_dp_accountings_bounds(case: dict[str, Any]) -> None:
    gaussian = case["kind"].endswith("gaussian")
    found = calibrate(
        "gaussian" if gaussian else "laplace",
        epsilon=case["target_epsilon"],
        delta=case["delta"],
        count=case["count"],
        sampling_rate=case.get("sampling_rate"),
    )
    assert found.epsilon <= case["target_epsilon"]
    # dp-accounting calibrates the Laplace scale b = 1/ε₀ (more noise: larger b)
    noise = found.value if gaussian else 1.0 / found.value
    if case["lower"] is not None:  # None: the optimistic PLD is too loose to say (its docstring)
        assert noise >= case["lower"] * (1 - 1e-9), (noise, case["lower"])
    assert noise <= case["upper"] * 1.001, (noise, case["upper"])


def _normal_delta_at_zero(sigma: float, q: float, k: int) -> float:
    """δ(0) of k Poisson-subsampled Gaussian steps (noise multiplier σ, rate q) from the normal
    law with each step's exact loss mean and variance, the larger of removal and addition.

    Removal: P′ = qN(μ, 1) + (1 − q)N(0, 1) against Q′ = N(0, 1), loss ln(1 + q(e^t − 1));
    addition: P′ = N(μ, 1) against (1 − q)N(μ, 1) + qN(0, 1), loss −ln(1 + q(e^{−t} − 1));
    t = μo − μ²/2 at the output o, μ = 1/σ (Zhu, Dong & Wang 2022, Section 5).
    """
    from scipy.special import ndtr

    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    mu = 1.0 / sigma

    def moments(values: np.ndarray) -> tuple[float, float]:
        return float(weights @ values), float(weights @ (values * values))

    worst = 0.0
    for remove in (True, False):

        def loss(o: np.ndarray, remove: bool = remove) -> np.ndarray:
            t = mu * o - mu * mu / 2
            return np.log1p(q * np.expm1(t)) if remove else -np.log1p(q * np.expm1(-t))

        at_p, at_q = moments(loss(nodes + mu)), moments(loss(nodes))  # o ~ N(μ,1), o ~ N(0,1)
        if remove:
            first = (q * at_p[0] + (1 - q) * at_q[0], q * at_p[1] + (1 - q) * at_q[1])
            second = at_q
        else:
            first = at_p
            second = ((1 - q) * at_p[0] + q * at_q[0], (1 - q) * at_p[1] + q * at_q[1])
        tails = []
        for mean, square in (first, second):
            tails.append(ndtr(k * mean / math.sqrt(k * (square - mean * mean))))
        worst = max(worst, float(tails[0] - tails[1]))
    return worst


def test_a_tiny_target_epsilon_finds_where_the_total_variation_is_delta() -> None:
    """A slow question (`--delta 1e-5 --calibrate 1e-9`, 300+ s before).

    ε ≈ 0 means δ(0) ≈ δ. The answer must not be below the root of the normal law's δ(0) = δ
    (less 1e-4 for ε = 1e-9 itself and the law's own error) and at most 0.2 % above it — the
    PLD's FFT and truncation move up to 0.1 % of δ to L = ∞, and its grid error is 0.1 % of δ.
    """
    q, k, delta = 0.01, 10_000, 1e-5
    found = calibrate("gaussian", epsilon=1e-9, delta=delta, count=k, sampling_rate=q)
    assert 0 <= found.epsilon <= 1e-9
    lo, hi = 30_000.0, 50_000.0  # the normal law's root, by bisection
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _normal_delta_at_zero(mid, q, k) > delta else (lo, mid)
    assert found.value >= hi * (1 - 1e-4), (found.value, hi)
    assert found.value <= hi * 1.002, (found.value, hi)


def test_the_pld_never_reports_zero_where_the_total_variation_exceeds_delta() -> None:
    """Below that σ, δ(0) > δ, so the true ε is positive: a grid that stopped early must
    still say so (every answer is an upper bound)."""
    q, k, delta = 0.01, 10_000, 1e-5
    for sigma in (39_000.0, 39_700.0, 39_850.0):
        assert _normal_delta_at_zero(sigma, q, k) > delta * 1.001
        step = SubsampledDP(GaussianDP(noise_multiplier=sigma, delta=delta), q)
        assert compose_pld([(step, k)], delta=delta).epsilon > 0
