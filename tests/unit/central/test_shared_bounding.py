"""Several table queries over one table's rows bounded once (dpkit_central.shared_bounding)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpkit
from dpkit.errors import InvalidParameter

pd = pytest.importorskip("pandas")
pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

OPTIONS = {
    "epsilon": 1.0,
    "privacy_unit_column": "user",
    "max_groups_contributed": 2,
    "max_rows_contributed": 3,
}
UNIT = dpkit.IdUnit("user", max_rows=3, max_groups=2)
KEYS = ["a", "b", "c", "d"]


def _heavy() -> Any:
    """People with rows in all four cities, several per city: every bound binds."""
    rng = np.random.default_rng(4)
    rows = 4000
    return pd.DataFrame(
        {
            "user": rng.integers(0, 60, rows),
            "city": rng.choice(KEYS, rows),
            "minutes": rng.uniform(0, 100, rows).round(1),
            "one": np.ones(rows),
        }
    )


@pytest.mark.parametrize("bounding", ["numpy", "duckdb"])
def test_the_aggregates_of_a_statement_read_one_set_of_rows(bounding: str) -> None:
    """COUNT(*) and SUM(one) count the same rows, and AVG's count is theirs: with each
    aggregate bounded on its own key, each would choose other cities and rows per person."""
    query = dpkit.sql(
        "SELECT city, COUNT(*) AS n, SUM(one, contribution_bounds_per_group => (0, 1)) AS s, "
        "AVG(minutes, contribution_bounds_per_group => (0, 100)) AS m FROM visits GROUP BY city",
        tables={"visits": _heavy()},
        options=OPTIONS,
        keys=KEYS,
        bounding=bounding,
    )
    counted, summed, averaged = query.aggregates(rng=np.random.default_rng(1))
    assert (counted.values["count"] < 180 * 3).all()  # bounded: 60 people, 2 cities, 3 rows
    assert np.array_equal(counted.values["count"], summed.values["count"])
    assert np.array_equal(summed.values["sum"], counted.values["count"].astype(float))
    assert np.array_equal(averaged.values["count"], counted.values["count"])


def test_rows_of_equal_values_are_interchangeable_so_row_order_does_not_matter() -> None:
    registry = dpkit.get_registry()
    frame = _heavy()
    queries = [
        registry.query("sum", epsilon=1.0, lower=0, upper=100).on(
            "minutes", by="city", keys=KEYS, unit=UNIT
        ),
        registry.query("count", epsilon=1.0).on("one", by="city", keys=KEYS, unit=UNIT),
    ]
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    found = [
        queries[0].bound_with(queries[1:], table, rng=np.random.default_rng(2))
        for table in (frame, shuffled)
    ]
    for query in queries:
        first, second = (rows.aggregate(query) for rows in found)
        assert first.identical(second)


def test_a_missing_value_is_dropped_after_the_bounding() -> None:
    """A person's row whose value is missing still counts for COUNT(*): the rows are bounded
    once, before any aggregate drops its missing values."""
    frame = pd.DataFrame(
        {"user": [1] * 4, "city": ["a"] * 4, "minutes": [np.nan, np.nan, np.nan, np.nan]}
    )
    registry = dpkit.get_registry()
    rows = registry.query("count", epsilon=1.0).on(None, by="city", keys=["a"], unit=UNIT)
    values = registry.query("count", epsilon=1.0).on("minutes", by="city", keys=["a"], unit=UNIT)
    bounded = rows.bound_with([values], frame, rng=np.random.default_rng(0))
    assert bounded.aggregate(rows).values["count"].tolist() == [3]
    assert bounded.aggregate(values).values["count"].tolist() == [0]


def test_queries_of_other_bounds_are_refused() -> None:
    registry = dpkit.get_registry()
    count = registry.query("count", epsilon=1.0)
    mine = count.on(None, by="city", keys=KEYS, unit=UNIT)
    others = [
        count.on(None, by="city", keys=KEYS, unit=dpkit.IdUnit("user", max_rows=3, max_groups=1)),
        count.on(None, by="city", keys=KEYS, unit=dpkit.IdUnit("user", max_rows=2, max_groups=2)),
        count.on(None, by="city", keys=KEYS, unit=dpkit.IdUnit("other", max_rows=3, max_groups=2)),
        count.on(None),
    ]
    for other in others:
        with pytest.raises(InvalidParameter) as raised:
            mine.bound_with([other], _heavy(), rng=np.random.default_rng(0))
        assert raised.value.parameter == "unit"
    one_row = count.on(None, by="city", keys=KEYS, unit=dpkit.IdUnit("user", 1, max_groups=2))
    bounded = mine.bound_with([one_row], _heavy(), rng=np.random.default_rng(0))
    people = bounded.aggregate(one_row).values["count"]
    assert (people <= 60).all() and people.sum() <= 120  # one row per (person, city)
