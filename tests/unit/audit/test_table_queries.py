"""An empirical privacy audit of grouped, id-level queries on id neighbours (one person's rows
removed), and of the variant that skips the truncation, which it must catch.

Method (the statistical tier of :mod:`dpkit.testing.blackbox`, written out here for whole
tables): release the query many times on D (a table without person x) and on D′ (with all of
x's rows); choose on a first batch the output event S (a half-line of one released cell) with
the largest certified bound; then, on a fresh batch, certify
ε_lb = ln(LCB(P[M(D′) ∈ S]) / UCB(P[M(D) ∈ S])) with one-sided Clopper–Pearson bounds at level
α/2 each (and the same with D and D′ swapped). ε_lb > ε is a violation; a correct query
exceeds its ε this way with probability ≤ α = 1e-7 per direction (the false-positive rate of
each test, by the union bound 2·1e-7).

To draw many independent releases cheaply, the table holds R = 8,000 independent *replicas*
of D (or D′): every id and every group key is tagged with its replica, so one aggregation
bounds every replica's ids independently (each id's selection depends only on its own rows) and
releases one vector whose coordinates for replica r are exactly one run on replica r.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from dpkit_central import Count, Sum
from scipy import stats

import dpkit

ALPHA = 1e-7
REPLICAS = 8_000
CITIES = ["a", "b", "c"]


def _people(with_x: bool) -> list[tuple[str, str, float]]:
    rows = [(f"p{i}", CITIES[i % 3], float(i % 5)) for i in range(12)]
    if with_x:  # x has many rows, in every city: without truncation they all count
        rows += [("x", city, 9.0) for city in CITIES for _ in range(8)]
    return rows


def _replicated(with_x: bool) -> pa.Table:
    rows = _people(with_x)
    users, cities, values = [], [], []
    for r in range(REPLICAS):
        for user, city, value in rows:
            users.append(f"{r}:{user}")
            cities.append(f"{r}:{city}")
            values.append(value)
    return pa.table({"user": users, "city": cities, "minutes": values})


def _releases(statistic: Any, column: str | None, unit: Any, with_x: bool, seed: int) -> np.ndarray:
    """(REPLICAS, 3) released cells: one independent release per replica."""
    keys = [f"{r}:{city}" for r in range(REPLICAS) for city in CITIES]
    query = statistic.on(column, by="city", keys=keys, unit=unit)
    if isinstance(unit, dpkit.IdUnit):  # the bounds an id can touch are those of one replica
        assert query.bounds()[0] == unit.max_groups
    result = query.run(_replicated(with_x), rng=np.random.default_rng(seed))
    return np.asarray(result.values, dtype=np.float64).reshape(REPLICAS, len(CITIES))


def _bound(hits_a: int, hits_b: int, trials: int) -> float:
    lower = stats.beta.ppf(ALPHA / 2, hits_a, trials - hits_a + 1) if hits_a else 0.0
    upper = stats.beta.ppf(1 - ALPHA / 2, hits_b + 1, trials - hits_b) if hits_b < trials else 1.0
    return math.log(lower / upper) if lower > 0 else 0.0


def _audit(statistic: Any, column: str | None, unit: Any) -> float:
    """The certified ε lower bound over half-line events of each cell, both directions."""
    selection = [_releases(statistic, column, unit, x, seed) for x, seed in ((False, 1), (True, 2))]
    test = [_releases(statistic, column, unit, x, seed) for x, seed in ((False, 3), (True, 4))]
    best = (0.0, None)
    for cell in range(len(CITIES)):
        small, large = selection[0][:, cell], selection[1][:, cell]
        for t in np.quantile(np.concatenate([small, large]), np.linspace(0.02, 0.98, 49)):
            for sign in (1, -1):  # the event {sign·y ≥ sign·t}, for D′ over D or D over D′
                for a, b in ((large, small), (small, large)):
                    bound = _bound(
                        int(np.sum(sign * a >= sign * t)),
                        int(np.sum(sign * b >= sign * t)),
                        REPLICAS,
                    )
                    if bound > best[0]:
                        best = (bound, (cell, t, sign, a is large))
    if best[1] is None:
        return 0.0
    cell, t, sign, large_first = best[1]
    small, large = test[0][:, cell], test[1][:, cell]
    a, b = (large, small) if large_first else (small, large)
    return _bound(int(np.sum(sign * a >= sign * t)), int(np.sum(sign * b >= sign * t)), REPLICAS)


@pytest.mark.parametrize(
    "statistic",
    [Count(epsilon=1.0), Sum(lower=0, upper=10, epsilon=1.0)],
    ids=["count", "sum"],
)
def test_id_level_queries_pass_the_audit_and_skipping_truncation_fails(statistic: Any) -> None:
    column = None if isinstance(statistic, Count) else "minutes"
    unit = dpkit.IdUnit("user", max_rows=1, max_groups=1)
    assert _audit(statistic, column, unit) <= statistic.epsilon
    # The same query with no truncation (every row taken as its own unit): x's 24 rows move the
    # cells by 8 each while the noise is calibrated to one row: the audit certifies ε ≫ 1.
    assert _audit(statistic, column, None) > 2 * statistic.epsilon
