"""Accuracy before spending: the half-widths ``accuracy(alpha)`` announces, before any data is
read, are those of the noise the release adds (same distribution object), and they cover.

Coverage is checked by simulation: 40,000 releases of fixed aggregates; the number of cells
whose error exceeds the announced half-width at α = 0.05 must not exceed the binomial(40000,
α) quantile at 1 − 1e-7 (false-positive rate 1e-7 per case; the intervals cover *at least*
1 − α, so an exact or conservative interval passes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from dpkit_central import Count, Histogram, Mean, PrivateKeys, Quantile, Sum
from scipy import stats

import dpkit

TRIALS = 40_000
ALPHA = 0.05

TABLE = pd.DataFrame(
    {
        "user": [1, 1, 2, 3, 3, 3, 4],
        "city": ["a", "a", "b", "a", "b", "b", "a"],
        "minutes": [10.0, 20.0, 5.0, 7.0, 30.0, 1.0, 90.0],
        "mode": ["bus", "car", "bus", "bus", "car", "car", "bus"],
    }
)
UNIT = dpkit.IdUnit("user", max_rows=2, max_groups=2)


def _cases() -> dict[str, Any]:
    return {
        "count-geometric": Count(epsilon=0.7).on(by="city", keys=["a", "b", "z"], unit=UNIT),
        "sum-laplace": Sum(lower=0, upper=50, epsilon=0.5).on(
            "minutes", by="city", keys=["a", "b"], unit=UNIT
        ),
        "sum-gaussian": Sum(lower=-10, upper=50, epsilon=0.5, noise="gaussian", delta=1e-5).on(
            "minutes", by="city", keys=["a", "b"], unit=UNIT
        ),
        "histogram": Histogram(categories=("bus", "car"), epsilon=1.0, noise="laplace").on(
            "mode", by="city", keys=["a", "b"], unit=UNIT
        ),
    }


@pytest.mark.parametrize("mode", ["fast", "secure"])
@pytest.mark.parametrize("name", sorted(_cases()))
def test_announced_half_widths_cover(name: str, mode: str) -> None:
    query = _cases()[name]
    rng = np.random.default_rng(3) if mode == "fast" else dpkit.SecureRandom()
    stand_in = np.random.default_rng(0) if mode == "fast" else None
    announced = query.accuracy(ALPHA, rng=stand_in)
    aggregates = query.aggregate(TABLE, rng=np.random.default_rng(1))
    exact = np.asarray(
        aggregates.values.get(
            "cells", aggregates.values.get("sum", aggregates.values.get("count"))
        ),
        dtype=np.float64,
    )
    misses = cells = 0
    batch = 2_000
    for _ in range(TRIALS // batch):
        # one release per replica of the aggregates: stack them as extra groups
        stacked = type(aggregates)(
            aggregates.keys * batch,
            {k: np.concatenate([v] * batch) for k, v in aggregates.values.items()},
        )
        released = query.release(stacked, rng=rng)
        assert released.noise == announced.noise
        error = np.abs(
            np.asarray(released.values, dtype=np.float64) - np.concatenate([exact] * batch)
        )
        misses += int(np.count_nonzero(error > announced.half_width))
        cells += error.size
    assert misses <= stats.binom.ppf(1 - 1e-7, cells, ALPHA)


def test_accuracy_reads_no_data_and_matches_the_plain_queries() -> None:
    """Ungrouped, record unit: the table query's accuracy is the plain query's."""
    for plain in (Count(epsilon=0.5), Sum(lower=0, upper=9, epsilon=0.5)):
        column = None if isinstance(plain, Count) else "x"
        table = plain.on(column)
        assert table.accuracy(0.1).noise is not None
        assert table.accuracy(0.1).half_width == pytest.approx(
            plain.accuracy(0.1).half_width, rel=1e-6
        )
    with pytest.raises(dpkit.InvalidParameter, match="alpha"):
        Count(epsilon=1.0).accuracy(1.5)


def test_mean_error_bound_covers() -> None:
    """The mean's bound (h_S + h_C·(U − L)/2)/(n − h_C) at α holds for a group of n = 400
    records in at least 1 − α of 20,000 releases (binomial quantile at 1 − 1e-7)."""
    mean = Mean(lower=0, upper=10, epsilon=1.0)
    rng = np.random.default_rng(8)
    values = rng.uniform(0, 10, 400)
    truth = values.mean()
    bound = mean.accuracy(ALPHA, rng=rng).mean_error(400)
    assert bound is not None
    errors = np.array([abs(mean.run(values, rng=rng).value - truth) for _ in range(20_000)])
    assert np.count_nonzero(errors > bound) <= stats.binom.ppf(1 - 1e-7, 20_000, ALPHA)


def test_quantile_rank_bound_and_private_keys() -> None:
    query = Quantile(q=0.5, lower=0, upper=100, epsilon=1.0).on(
        "minutes", by="city", keys=PrivateKeys(epsilon=1.0, delta=1e-6), unit=UNIT
    )
    secure = query.accuracy(0.05)
    assert secure.unit == "ranks" and secure.half_width is not None
    # per group at ε/(G·R) = 1/4: (2/0.25)(ln m + ln 20) with m ≤ 2³⁰ + 1 lattice points
    assert secure.half_width == pytest.approx(
        8 * (np.log(query.statistic.per_group(query.contribution).lattice_points()) + np.log(20))
    )
    # A table quantile runs the lattice mechanism in both modes (its engines send only
    # per-cell counts to the driver), so fast mode has the same bound.
    assert query.accuracy(0.05, rng=np.random.default_rng(0)).half_width == secure.half_width
    assert secure.selection == query.selection.units_needed(0.95)
    assert secure.privacy == query.privacy


def test_a_table_release_prints_each_group_with_its_interval() -> None:
    """``print`` shows per group (and histogram cell) the value ± the noise's half-width the
    result states, a mean's [lower, upper] from its own interval, and the first 20 groups."""
    from dpkit._summary import number

    cases = _cases()
    total = cases["sum-laplace"].run(TABLE, rng=np.random.default_rng(0))
    half = number(total.noise_half_width(0.95))
    lines = str(total).splitlines()
    assert lines[0] == "sum (laplace): 2 groups" and lines[1].split() == ["city", "value", "(95%)"]
    for line, key, value in zip(lines[3:5], ["a", "b"], total.values, strict=True):
        assert line.split() == [key, number(float(value)), f"±{half}"]
    assert lines[5].startswith("interval: exact quantiles")
    cells = str(cases["histogram"].run(TABLE, rng=np.random.default_rng(0))).splitlines()
    assert [line.split()[:2] for line in cells[3:7]] == [
        ["a", "bus"], ["a", "car"], ["b", "bus"], ["b", "car"]
    ]  # fmt: skip
    mean = Mean(lower=0, upper=50, epsilon=1.0).on("minutes", by="city", keys=["a"], unit=UNIT)
    released = mean.run(TABLE, rng=np.random.default_rng(0))
    low, high = released.confidence_interval(0.95)
    assert f"[{number(float(low[0]))}, {number(float(high[0]))}]" in str(released)
    many = Count(epsilon=1.0).on(by="city", keys=[f"k{i}" for i in range(25)], unit=UNIT)
    text = str(many.run(TABLE, rng=np.random.default_rng(0)))
    assert "k19" in text and "k20" not in text and "… and 5 more" in text
