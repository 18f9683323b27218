"""Partition selection: the keep probabilities are (ε/G, δ/G)-DP exactly, match the optimal
mechanism of Desfontaines et al. 2022 (Theorem 1), and a key held by one id is released with
probability ≤ δ — also empirically, through the table query that counts ids, not rows."""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from dpkit_central import Count, PartitionSelection, PrivateKeys
from scipy import stats

import dpkit

ONE = 1 << 64


def _exp(x: Fraction, digits: int = 90) -> tuple[Fraction, Fraction]:
    """(lower, upper) rational bounds of e^x from 90-digit decimal arithmetic (an independent
    computation: not the module's 60 digits and widening)."""
    with decimal.localcontext() as context:
        context.prec = digits
        value = (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).exp()
    slack = Fraction(1, 10**80)
    return Fraction(value) * (1 - slack), Fraction(value) * (1 + slack)


@pytest.mark.parametrize(
    ("epsilon", "delta", "groups"),
    [
        (1.0, 1e-6, 1),
        (0.1, 1e-9, 1),
        (2.0, 0.01, 3),
        (0.5, 1e-12, 10),
        (8.0, 1e-5, 1),
        (0.1, 1e-6, 1),  # ε's binary value is above its decimal, by 5.5·10⁻¹⁸
        (1.0, 2.0**-25, 1),  # δ's too, and 2⁶⁴δ is a whole number at the binary value
    ],
)
def test_keep_probabilities_satisfy_both_dp_constraints_exactly(
    epsilon: float, delta: float, groups: int
) -> None:
    """For every n: π(n) ≤ e^ε′π(n−1) + δ′ and 1 − π(n−1) ≤ e^ε′(1 − π(n)) + δ′ (and the two
    reverse directions, from monotonicity), checked in exact rationals against the true
    e^ε′ (its lower bound, the side that makes the checks hardest), ε and δ read as the ledger
    charges them (their shortest decimals)."""
    selection = PartitionSelection(epsilon=epsilon, delta=delta, max_groups=groups)
    eps = Fraction(repr(epsilon)) / groups
    low, _ = _exp(eps)
    d = Fraction(repr(delta)) / groups
    p = [Fraction(k, ONE) for k in selection.thresholds] + [Fraction(1)]
    assert p[0] == 0
    for n in range(1, len(p)):
        assert p[n] >= p[n - 1]
        assert p[n] <= low * p[n - 1] + d
        assert 1 - p[n - 1] <= low * (1 - p[n]) + d


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-6), (0.3, 1e-8), (3.0, 1e-3)])
def test_keep_probabilities_follow_the_optimal_closed_form(epsilon: float, delta: float) -> None:
    """The paper's closed form (Desfontaines et al. 2022, Theorem 1): π(n) = δ(e^{nε} − 1)/(e^ε − 1)
    up to the first crossover n₁, then 1 − π(n) = e^{−(n−n₁)ε}(1 − π(n₁)) − δ(1 − e^{−(n−n₁)ε})/(e^ε − 1),
    then 1 (computed here in floats independently). The thresholds may only be lower, by the
    directed rounding: each step floors by < 2⁻⁶⁴ and the recursion multiplies earlier errors by
    e^ε, so after N steps the gap is < 2⁻⁶⁴·e^{Nε}/(e^ε − 1) (plus float error here)."""
    selection = PartitionSelection(epsilon=epsilon, delta=delta)
    closed = [0.0]
    n = 0
    while closed[-1] < 1.0:
        n += 1
        previous = closed[-1]
        grow = math.exp(epsilon) * previous + delta
        shrink = 1.0 - math.exp(-epsilon) * (1.0 - previous - delta)
        closed.append(min(grow, shrink, 1.0))
    n1 = 1 + math.floor(math.log1p(math.tanh(epsilon / 2) * (1 / delta - 1)) / epsilon)
    for m in range(1, n1 + 1):  # the first regime, in its closed form
        assert closed[m] == pytest.approx(delta * math.expm1(m * epsilon) / math.expm1(epsilon))
    steps = len(selection.thresholds)
    gap = 2.0**-64 * math.exp(steps * epsilon) / math.expm1(epsilon) + 1e-13
    for m, k in enumerate(selection.thresholds):
        assert k / ONE <= closed[m] + 1e-15
        assert closed[m] - k / ONE < gap
    assert len(selection.thresholds) in (len(closed) - 1, len(closed))


def test_one_id_keys_are_released_with_probability_at_most_delta() -> None:
    selection = PartitionSelection(epsilon=1.0, delta=1e-6, max_groups=4)
    assert selection.keep_probability(0) == 0
    assert selection.keep_probability(1) <= Fraction(1e-6) / 4
    assert selection.keep_probability(10**9) == 1
    assert selection.units_needed(0.95) < len(selection.thresholds)


@pytest.mark.parametrize("mode", ["secure", "fast"])
def test_empirical_release_probability_of_a_one_id_key(mode: str) -> None:
    """200,000 keys held by one id each, δ = 0.01: the number released is at most the
    binomial(200000, δ) quantile at 1 − 1e-7 (false-positive rate 1e-7; the declared
    probability is ⌊2⁶⁴δ⌋/2⁶⁴ ≤ δ, so the test is conservative)."""
    trials, delta = 200_000, 0.01
    selection = PartitionSelection(epsilon=1.0, delta=delta)
    rng = None if mode == "secure" else np.random.default_rng(11)
    released = int(selection.select(np.ones(trials, dtype=np.int64), rng=rng).sum())
    assert released <= stats.binom.ppf(1 - 1e-7, trials, delta)
    # and not far below either: the mechanism is not secretly dropping everything
    assert released >= stats.binom.ppf(1e-7, trials, delta)


def test_the_table_query_counts_ids_not_rows_and_a_row_count_would_leak() -> None:
    """One person holds the key 'rare' with 50 rows. After bounding, the key has one id, so
    it is released with probability ≤ δ. A buggy variant that feeds the *row* count to the
    selection releases it almost surely (π(50) = 1 at these parameters): the empirical check
    above would catch it."""
    table = pd.DataFrame(
        {
            "user": ["x"] * 50 + [f"u{i}" for i in range(200)],
            "city": ["rare"] * 50 + ["common"] * 200,
        }
    )
    query = Count(epsilon=1.0).on(
        by="city",
        keys=PrivateKeys(epsilon=1.0, delta=0.01),
        unit=dpkit.IdUnit("user", max_rows=100, max_groups=1),
    )
    aggregates = query.aggregate(table, rng=np.random.default_rng(3))
    units = dict(zip(aggregates.keys, aggregates.values["units"], strict=True))
    assert units[("rare",)] == 1 and units[("common",)] == 200
    rows = dict(zip(aggregates.keys, aggregates.values["count"], strict=True))
    assert rows[("rare",)] == 50
    selection = query.selection
    assert selection is not None
    buggy = selection.select(np.full(20_000, rows[("rare",)]), rng=np.random.default_rng(5))
    assert buggy.sum() > stats.binom.ppf(1 - 1e-7, 20_000, 0.01)  # the check above fails


def test_tiny_selection_epsilon_is_refused_before_anything_runs() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="epsilon"):
        PartitionSelection(epsilon=1e-6, delta=1e-12)
    with pytest.raises(dpkit.InvalidParameter, match="delta"):
        PartitionSelection(epsilon=1.0, delta=0.0)


def test_select_is_total() -> None:
    selection = PartitionSelection(epsilon=1.0, delta=1e-6)
    out = selection.select(np.array([-5, 0, 1, 10**12]), rng=np.random.default_rng(0))
    assert out.tolist()[0] is False and out.tolist()[1] is False and out.tolist()[3] is True
    assert selection.select(np.zeros(0)).shape == (0,)
