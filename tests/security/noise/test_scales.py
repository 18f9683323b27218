"""The noise scale as released: a calibrated Gaussian never reports more than its target, and a
geometric of tiny scale releases in secure mode.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import dpkit


@pytest.mark.parametrize(("epsilon", "count"), [(1.0, 2), (1.0, 10), (8.0, 2), (8.0, 10)])
def test_a_calibrated_gaussian_never_reports_more_than_its_target(
    epsilon: float, count: int
) -> None:
    """Attack on the contract "``epsilon`` is never above ``target_epsilon``": the exact
    Gaussian path solved σ = √k/μ and reported the accountant's ε for it, which is rounded
    up and came out 1e-12 above the target at δ = 1e-8 (so a session with exactly that
    budget could refuse the calibrated plan). Now σ is nudged up until the reported ε fits."""
    found = dpkit.calibrate("gaussian", epsilon=epsilon, delta=1e-8, count=count)
    assert found.epsilon <= epsilon
    again = dpkit.account(
        [(dpkit.GaussianDP(noise_multiplier=found.value, delta=1e-8), count)], delta=1e-8
    )
    assert again.epsilon <= epsilon


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(2000.0, 1.0), (1e12, 1.0), (1e6, 1e-6)])
def test_geometric_with_a_tiny_scale_releases_in_secure_mode(
    epsilon: float, sensitivity: float
) -> None:
    """Attack: a geometric release whose scale Δ/ε has a float value with a denominator above
    2⁶² (ε/Δ ≳ 1000). The exact sampler refused it — after the spend (``ReleaseFailed``), for
    a reason the parameters decide. Now the scale is rounded up to a rational the sampler takes
    (the realised ε can only fall)."""
    mechanism = dpkit.mechanism("geometric", epsilon=epsilon, sensitivity=sensitivity)
    assert mechanism.secure_scale >= Fraction(sensitivity) / Fraction(epsilon)
    session = dpkit.Session(budget=(1e13, 0.0), ledger=":memory:")
    released = session.release(mechanism, np.array([3, 5]))
    assert np.asarray(released.values).dtype == np.int64
