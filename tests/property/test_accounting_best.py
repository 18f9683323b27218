"""``account(..., method="best")``: never above any method, never below the truth.

For random compositions of Gaussian, Laplace, pure, randomized-response and (ε, δ) events, the
best bound is at most what each backend gives when asked on its own, and at least the exact ε
where an exact value is known independently:

* Gaussian-only compositions: one Gaussian with μ = sqrt(Σ k_i/σ_i²) (Dong, Roth & Su 2022,
  Corollary 3.3), solved here with scipy's brentq on Balle & Wang's curve in log space;
* one pure or randomized-response event used k times: k-fold binary randomized response
  (Kairouz, Oh & Viswanath 2015, Theorem 3.3), summed here over the binomial with scipy.

Hypothesis runs with a fixed derandomised seed; a failure is a real counter-example (the
checks are exact inequalities up to a relative float tolerance of 1e-9, not statistics).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import METHODS, account
from dpkit.errors import DPKitError
from dpkit.privacy import (
    ApproximateDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
)

_TOLERANCE = 1e-9


def _load_exact() -> Any:
    """tests/data/exact_references.py (plain numpy and scipy, shared with the vector generator)."""
    path = Path(__file__).resolve().parents[1] / "data" / "exact_references.py"
    spec = importlib.util.spec_from_file_location("exact_references", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_EXACT = _load_exact()
_exact_gaussian, _exact_rr = _EXACT.exact_gaussian, _EXACT.exact_rr


_EPS = st.floats(0.05, 2.0)
_EVENT = st.one_of(
    st.builds(lambda s: GaussianDP(s, 1e-6), st.floats(0.5, 20.0)),
    st.builds(LaplaceDP, _EPS),
    st.builds(PureDP, _EPS),
    st.builds(RandomizedResponseDP, _EPS),
    st.builds(lambda e, d: ApproximateDP(e, d), _EPS, st.sampled_from([1e-9, 1e-8])),
)
_GROUPS = st.lists(st.tuples(_EVENT, st.integers(1, 60)), min_size=1, max_size=3)


def _check(groups: list[tuple[PrivacyEvent, int]], delta: float) -> float:
    best = account(groups, delta=delta)
    for method in METHODS:
        try:
            other = account(groups, delta=delta, method=method).epsilon
        except DPKitError:
            continue
        assert best.epsilon <= other * (1 + _TOLERANCE), (method, best.epsilon, other)
    return best.epsilon


@settings(max_examples=40, deadline=None, derandomize=True)
@given(groups=_GROUPS, delta=st.sampled_from([1e-5, 1e-7]))
def test_best_is_never_above_any_method(
    groups: list[tuple[PrivacyEvent, int]], delta: float
) -> None:
    _check(groups, delta)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    sigmas=st.lists(st.tuples(st.floats(0.3, 30.0), st.integers(1, 500)), min_size=1, max_size=3),
    delta=st.sampled_from([1e-5, 1e-7]),
)
def test_best_is_the_exact_gaussian_value(sigmas: list[tuple[float, int]], delta: float) -> None:
    groups: list[tuple[PrivacyEvent, int]] = [(GaussianDP(s, 1e-6), k) for s, k in sigmas]
    mu = math.sqrt(math.fsum(k / (s * s) for s, k in sigmas))
    exact = _exact_gaussian(mu, delta)
    got = _check(groups, delta)
    assert exact * (1 - _TOLERANCE) <= got <= exact * (1 + 1e-6) + 1e-12


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    eps=_EPS,
    count=st.integers(1, 300),
    kind=st.sampled_from([PureDP, RandomizedResponseDP, LaplaceDP]),
    delta=st.sampled_from([1e-5, 1e-7]),
)
def test_best_is_never_below_randomized_response(
    eps: float, count: int, kind: type, delta: float
) -> None:
    """k-fold RR is the worst case of k-fold ε-DP: exact for pure and RR events, an upper
    bound on the (tighter) Laplace value, which must not be *above* it."""
    got = _check([(kind(eps), count)], delta)
    exact = _exact_rr(eps, count, delta)
    if kind is LaplaceDP:
        assert got <= exact * (1 + 1e-3) + 1e-9
    else:
        assert exact * (1 - _TOLERANCE) <= got <= exact * (1 + 1e-3) + 1e-9
