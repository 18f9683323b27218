"""The noise scale as released: a calibrated Gaussian never reports more than its target, a
geometric of tiny scale releases in secure mode, and the geometric's secure scale never
realises more than the ledger charges. Deterministic checks (false-positive rate 0).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    epsilon=st.floats(min_value=1e-3, max_value=1e4),
    sensitivity=st.floats(min_value=1e-3, max_value=1e3),
)
@example(epsilon=0.1, sensitivity=1.0)  # 0.1's binary value lies 5.5e-18 above its decimal
@example(epsilon=0.3, sensitivity=0.7)
def test_the_geometric_sampler_never_realises_more_than_the_charge(
    epsilon: float, sensitivity: float
) -> None:
    """The secure scale t makes the realised loss Δ/t at most the ε the ledger charges: Δ at
    its larger reading, ε at its smaller (binary value or shortest decimal), exactly."""
    mechanism = dpkit.mechanism("geometric", epsilon=epsilon, sensitivity=sensitivity)
    largest = max(Fraction(sensitivity), Fraction(repr(sensitivity)))
    charged = min(Fraction(epsilon), Fraction(repr(epsilon)))
    assert largest / mechanism.secure_scale <= charged or mechanism.secure_scale == Fraction(
        1, 1 << 20
    )


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    epsilon=st.floats(min_value=1e-3, max_value=1e4),
    sensitivity=st.floats(min_value=1e-3, max_value=1e3),
)
@example(epsilon=1.4024325269393327, sensitivity=3.6558890120166256)
def test_the_geometric_secure_scale_is_a_rational_the_sampler_takes(
    epsilon: float, sensitivity: float
) -> None:
    """Numerator and denominator at most 2⁶², which the exact sampler needs (it refused others
    after the spend): Δ/ε in exact rationals bounds neither, so its rounding must bound both."""
    scale = dpkit.mechanism("geometric", epsilon=epsilon, sensitivity=sensitivity).secure_scale
    assert scale.numerator <= 1 << 62 and scale.denominator <= 1 << 62


def test_a_geometric_of_an_unround_scale_releases_in_secure_mode() -> None:
    mechanism = dpkit.mechanism("geometric", epsilon=1.4024325269393327, sensitivity=3.65588901)
    released = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:").release(
        mechanism, np.array([3, 5])
    )
    assert np.asarray(released.values).dtype == np.int64
