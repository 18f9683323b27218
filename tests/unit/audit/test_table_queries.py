"""An empirical privacy audit of grouped, id-level table queries on id neighbours (one person's
rows removed), in both randomness modes, and of the variant that skips the truncation, which
it must catch.

The method and its false-positive rate are :mod:`dpkit.testing.table_audit`'s: R replicas of D
(or D′, with person x's 24 rows) in one table, each released independently; the event chosen
on one batch, certified on a fresh one, in fast mode and in secure mode (a keyed SecureRandom).
At α = 2e-7 over both modes, a correct query is reported as a violation with probability
≤ 2e-7.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from dpkit_central import Count, Sum
from support.replica_audit import CITIES, replica_keys, replicated

import dpkit
from dpkit.testing import audit_releases

REPLICAS = 4_000
ALPHA = 2e-7
TABLES = {with_x: replicated(with_x, REPLICAS) for with_x in (False, True)}


def _release(statistic: Any, column: str | None, unit: Any) -> Any:
    query = statistic.on(column, by="city", keys=replica_keys(REPLICAS), unit=unit)
    if isinstance(unit, dpkit.IdUnit):  # the bounds an id can touch are those of one replica
        assert query.bounds()[0] == unit.max_groups

    def release(with_x: bool, rng: Any) -> np.ndarray:
        result = query.run(TABLES[with_x], rng=rng)
        return np.asarray(result.values, dtype=np.float64).reshape(REPLICAS, len(CITIES))

    return release


@pytest.mark.parametrize(
    "statistic",
    [Count(epsilon=1.0), Sum(lower=0, upper=10, epsilon=1.0)],
    ids=["count", "sum"],
)
def test_id_level_queries_pass_the_audit_and_skipping_truncation_fails(statistic: Any) -> None:
    column = None if isinstance(statistic, Count) else "minutes"
    unit = dpkit.IdUnit("user", max_rows=1, max_groups=1)
    passed = audit_releases(
        _release(statistic, column, unit), epsilon=statistic.epsilon, alpha=ALPHA, seed=1
    )
    assert passed.verdicts == {"fast": "pass", "secure": "pass"}, passed.format_text()
    # The same query with no truncation (every row taken as its own unit): x's 24 rows move the
    # cells by 8 each while the noise is calibrated to one row: the audit certifies ε ≫ 1.
    caught = audit_releases(
        _release(statistic, column, None), epsilon=statistic.epsilon, alpha=ALPHA, seed=2
    )
    assert all(m.epsilon_lower_bound > 2 * statistic.epsilon for m in caught.modes), caught
