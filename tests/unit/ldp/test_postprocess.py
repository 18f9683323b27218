"""Post-processing of frequency estimates (Wang et al. 2020): clip, Norm-Sub, simplex projection."""

from __future__ import annotations

import numpy as np
import pytest
from dpkit_ldp import postprocess
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dpkit

VECTORS = hnp.arrays(
    np.float64,
    st.integers(min_value=1, max_value=40),
    elements=st.integers(min_value=-80_000, max_value=80_000).map(lambda i: i / 8),
)
TOTALS = st.integers(min_value=0, max_value=100_000).map(float)


@given(y=VECTORS, total=TOTALS)
def test_simplex_projection_satisfies_kkt(y: np.ndarray, total: float) -> None:
    """Independent characterisation: x ≥ 0, Σx = total, and y − x is one constant τ on the support
    of x and ≤ τ off it (the KKT conditions of min ‖x − y‖² on the scaled simplex)."""
    x = postprocess.project_simplex(y, total)
    assert np.all(x >= 0)
    assert x.sum() == pytest.approx(total, rel=1e-9, abs=1e-6)
    if total > 0:
        support = x > 0
        tau = (y - x)[support]
        scale = 1e-9 * (1 + np.abs(y).max() + total)
        assert np.ptp(tau) <= scale
        assert np.all(y[~support] <= tau[0] + scale)


@given(y=VECTORS, total=TOTALS)
def test_norm_sub_equals_the_projection(y: np.ndarray, total: float) -> None:
    """Norm-Sub (iterated) and the sort-based projection are two algorithms for one point."""
    a = postprocess.norm_sub(y, total)
    b = postprocess.project_simplex(y, total)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * (1 + np.abs(y).max() + total))


@given(y=VECTORS, total=TOTALS)
def test_clip_renormalise(y: np.ndarray, total: float) -> None:
    x = postprocess.clip_renormalise(y, total)
    assert np.all(x >= 0) and x.sum() == pytest.approx(total, rel=1e-9, abs=1e-6)
    positive = y > 0
    if positive.any() and total > 0:
        assert np.all(x[~positive] == 0)
        np.testing.assert_allclose(x[positive] / y[positive], total / y[positive].sum(), rtol=1e-9)
    else:
        np.testing.assert_allclose(x, total / y.size)


def test_worked_example() -> None:
    """ĉ = (6, 3, −1, 2), n = 8: Norm-Sub subtracts δ = 1 from the positives → (5, 2, 0, 1)."""
    y = np.array([6.0, 3.0, -1.0, 2.0])
    np.testing.assert_allclose(postprocess.norm_sub(y, 8), [5, 2, 0, 1])
    np.testing.assert_allclose(postprocess.project_simplex(y, 8), [5, 2, 0, 1])
    np.testing.assert_allclose(postprocess.clip_renormalise(y, 8), [48 / 11, 24 / 11, 0, 16 / 11])
    # Positives summing to less than n: mass is added, and a slightly negative value comes back.
    np.testing.assert_allclose(postprocess.norm_sub([-0.1, 0.2], 1.0), [0.35, 0.65])


def test_bad_input() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="estimates"):
        postprocess.norm_sub([np.nan, 1.0], 1.0)
    with pytest.raises(dpkit.InvalidParameter, match="total"):
        postprocess.clip_renormalise([1.0], -1.0)
    with pytest.raises(dpkit.InvalidParameter, match="method"):
        postprocess.apply("round", [1.0], 1.0)
