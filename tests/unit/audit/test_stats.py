"""The auditor's statistics against independent computations.

Clopper–Pearson bounds are checked against the binomial tail they invert (scipy.stats.binom,
a different code path from the beta quantiles used by dpkit), and their coverage is checked
exactly by enumerating every outcome of a small binomial. No randomness: no false positives.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpkit.testing._stats import (
    chi_square_pvalue,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    logsumexp,
)


@pytest.mark.parametrize(("k", "n"), [(1, 10), (5, 10), (9, 10), (37, 200), (5000, 10_000)])
@pytest.mark.parametrize("alpha", [0.05, 1e-3, 1e-7])
def test_bounds_invert_the_binomial_tail(k: int, n: int, alpha: float) -> None:
    """LCB solves P[Bin(n, p) ≥ k] = α and UCB solves P[Bin(n, p) ≤ k] = α."""
    lower = float(clopper_pearson_lower(k, n, alpha))
    upper = float(clopper_pearson_upper(k, n, alpha))
    assert stats.binom.sf(k - 1, n, lower) == pytest.approx(alpha, rel=1e-6)
    assert stats.binom.cdf(k, n, upper) == pytest.approx(alpha, rel=1e-6)
    assert lower < k / n < upper


def test_bounds_at_the_edges() -> None:
    assert clopper_pearson_lower(0, 100, 0.01) == 0.0
    assert clopper_pearson_upper(100, 100, 0.01) == 1.0
    # UCB with no successes is 1 − α^{1/n} (the "rule of three" for α = 0.05).
    assert float(clopper_pearson_upper(0, 100, 0.05)) == pytest.approx(1 - 0.05 ** (1 / 100))


@pytest.mark.parametrize("p", [0.03, 0.2, 0.5, 0.81])
def test_one_sided_coverage_is_at_least_one_minus_alpha_exactly(p: float) -> None:
    """Sum the Bin(40, p) probability of every k whose bound misses p: at most α."""
    n, alpha = 40, 0.05
    ks = np.arange(n + 1)
    pmf = stats.binom.pmf(ks, n, p)
    assert pmf[clopper_pearson_lower(ks, n, alpha) > p].sum() <= alpha
    assert pmf[clopper_pearson_upper(ks, n, alpha) < p].sum() <= alpha


def test_epsilon_lower_bound_formula_and_delta() -> None:
    a = 1e-3
    expected = math.log(
        float(clopper_pearson_lower(700, 1000, a)) / float(clopper_pearson_upper(300, 1000, a))
    )
    assert float(epsilon_lower_bound(700, 300, 1000, 1000, a)) == pytest.approx(expected)
    with_delta = math.log(
        (float(clopper_pearson_lower(700, 1000, a)) - 0.1)
        / float(clopper_pearson_upper(300, 1000, a))
    )
    assert float(epsilon_lower_bound(700, 300, 1000, 1000, a, 0.1)) == pytest.approx(with_delta)
    assert float(epsilon_lower_bound(10, 300, 1000, 1000, a)) == 0.0  # nothing certified
    assert float(epsilon_lower_bound(5, 0, 1000, 1000, a, delta=0.5)) == 0.0


def test_chi_square_matches_scipy_when_no_pooling_is_needed() -> None:
    observed = np.array([30, 25, 45])
    expected = np.array([33.3, 33.3, 33.4])
    reference = stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue
    assert chi_square_pvalue(observed, expected * observed.sum() / expected.sum()) == pytest.approx(
        reference
    )


def test_chi_square_pools_small_cells() -> None:
    # Cells expecting 1, 1, 2, 3 (sorted) pool into one cell of 7 with the 93: two cells left.
    observed = np.array([1, 0, 3, 3, 93])
    expected = np.array([1.0, 1.0, 2.0, 3.0, 93.0])
    statistic = (7 - 7) ** 2 / 7 + (93 - 93) ** 2 / 93
    assert chi_square_pvalue(observed, expected) == pytest.approx(stats.chi2.sf(statistic, 1))


def test_logsumexp_handles_infinities_and_large_values() -> None:
    values = np.array([[1000.0, 1000.0, -np.inf], [-np.inf, -np.inf, -np.inf]])
    result = logsumexp(values, axis=1)
    assert result[0] == pytest.approx(1000 + math.log(2))
    assert result[1] == -np.inf


def test_an_audit_imports_scipy_special_only() -> None:
    """scipy.stats costs about a second of start-up; the auditor needs two special functions."""
    import subprocess
    import sys

    code = (
        "import sys, dpkit; from dpkit.testing import audit; "
        "r = audit(dpkit.mechanism('rr', epsilon=1.0), samples=2000, seed=0); "
        "print(r.verdict, 'scipy.special' in sys.modules, 'scipy.stats' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["pass", "True", "False"]
