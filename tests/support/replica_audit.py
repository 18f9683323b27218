"""The tables the replica audits of :mod:`dpkit.testing.table_audit` run on: D, a few people
with one row each in every city, and the heavy person x, with eight rows in every city whose
values lie beyond the clamping bounds the tests declare (without truncation they all count).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from dpkit.testing.table_audit import by_replica, replicate, tag_keys

CITIES = ("a", "b", "c")
#: x's rows in every city.
HEAVY = 8


def people(with_x: bool, per_city: int = 4) -> list[tuple[str, str, float]]:
    """(user, city, minutes) rows: ``per_city`` people in each city with one row each, and x
    (in D′) with :data:`HEAVY` rows in every city, each of 99 minutes."""
    rows = [(f"p{i}", CITIES[i % 3], float(i % 5)) for i in range(len(CITIES) * per_city)]
    if with_x:
        rows += [("x", city, 99.0) for city in CITIES for _ in range(HEAVY)]
    return rows


def table(rows: list[tuple[str, str, float]]) -> pa.Table:
    return pa.table(
        {
            "user": [r[0] for r in rows],
            "city": [r[1] for r in rows],
            "minutes": [r[2] for r in rows],
        }
    )


def visits(per_city: int = 4) -> pa.Table:
    """D, as a table."""
    return table(people(False, per_city))


def person() -> pa.Table:
    """x's rows alone (``person=`` of :func:`dpkit.testing.audit_sql`)."""
    return table([row for row in people(True, 0)])


def replicated(with_x: bool, replicas: int, per_city: int = 4) -> pa.Table:
    """R replicas of D or D′, each id and city tagged with its replica."""
    return replicate(table(people(with_x, per_city)), replicas, ["user", "city"])


def replica_keys(replicas: int) -> list[Any]:
    """Every replica's cities, the group keys of a release over :func:`replicated`."""
    return tag_keys(CITIES, replicas)


def cells(result: Any, replicas: int) -> np.ndarray:
    """The (R, cities × 2) cells of a SQL release whose columns are (city, n, total)."""
    columns = [[row[i] for row in result.rows] for i in (1, 2)]
    return by_replica([row[0] for row in result.rows], columns, replicas, CITIES)
