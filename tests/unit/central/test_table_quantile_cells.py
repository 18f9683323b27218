"""A grouped quantile's per-group lattice cells ⌊z/h⌋ (and their record counts), as the table
query's engine computes them, against an exact computation from the records (Fractions): the
cells travel as ⌊z/h⌋ − ⌊L/h⌋ in Int64 and must come back exact, also far from zero."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from dpkit_central import Quantile

import dpkit


def _exact_cells(values: list[float], lower: float, upper: float, h: float) -> Counter[float]:
    """⌊z/h⌋ of each clamped value, by exact rational arithmetic."""
    out: Counter[float] = Counter()
    for x in values:
        z = Fraction(min(max(x, lower), upper))  # clamping is exact
        out[float(math.floor(z / Fraction(h)))] += 1
    return out


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        (0.0, 120.0),
        (-3.5, 2.25),
        (1e99, 1e99 + 1e89),
        (-1e-90, 1e-90),
        (2.0**60, 2.0**60 + 2.0**12),
    ],
)
def test_lattice_cells_are_exact(lower: float, upper: float) -> None:
    rng = np.random.default_rng(7)
    span = upper - lower
    values = [*(lower + span * rng.uniform(-0.2, 1.2, 600)).tolist(), lower, upper, -math.inf]
    groups = rng.choice(["a", "b", "c"], len(values)).tolist()
    table = pa.table({"g": groups, "x": values})
    stat = Quantile(q=0.5, lower=lower, upper=upper, epsilon=1.0)
    query = stat.on("x", by="g", keys=["a", "b", "c"])
    found = query.aggregate(table, rng=np.random.default_rng(0))
    h = stat.lattice_step()
    assert found.lattice is not None
    for key, (cells, counts) in zip(found.keys, found.lattice, strict=True):
        mine = [v for v, g in zip(values, groups, strict=True) if g == key[0]]
        expected = _exact_cells(mine, lower, upper, h)
        assert list(cells) == sorted(expected)  # increasing, each exact
        assert dict(zip(cells.tolist(), counts.tolist(), strict=True)) == expected


def test_the_release_is_a_lattice_point_in_range() -> None:
    stat = Quantile(q=0.5, lower=1e99, upper=1e99 + 1e89, epsilon=1.0)
    table = pa.table({"g": ["a"] * 50, "x": [1e99 + 5e88] * 50})
    result = stat.on("x", by="g", keys=["a"]).run(table, rng=dpkit.SecureRandom())
    value = float(result.values[0])
    assert stat.lower <= value <= stat.upper
    assert Fraction(value) / Fraction(stat.lattice_step()) == math.floor(
        Fraction(value) / Fraction(stat.lattice_step())
    )
