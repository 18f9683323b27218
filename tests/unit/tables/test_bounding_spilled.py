"""A DuckDB relation bounded in this process in parts spilled to disk keeps the rows the
whole table keeps (dpkit.tables._duckdb.bounded_in_parts)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit.tables._duckdb import bounded_in_parts
from dpkit.tables.bounding import Bounding, BoundingKey, bound_eager
from dpkit.tables.frame import narwhals

pa = pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")


def _table(ids: Any) -> Any:
    rng = np.random.default_rng(7)
    rows = len(ids)
    return pa.table(
        {
            "id": ids,
            "city": rng.choice(["a", "b", "c", "d"], rows),
            "minutes": np.where(rng.random(rows) < 0.1, np.nan, rng.uniform(0, 9, rows).round()),
        }
    )


def _sorted(table: Any) -> list[tuple[Any, ...]]:
    """The rows as a sorted list (NaN spelled out: it equals nothing)."""
    columns = [table.column(c).to_pylist() for c in table.column_names]
    rows = [tuple("NaN" if v != v else v for v in row) for row in zip(*columns, strict=True)]
    return sorted(rows, key=repr)


IDS = {
    "integers": lambda rng, n: rng.integers(-50, 50, n),
    "text": lambda rng, n: np.array([f"person {i}" for i in rng.integers(0, 90, n)]),
    # −0.0 and 0.0 are one person: both must land in one part.
    "floats": lambda rng, n: rng.choice([-0.0, 0.0, 1.5, -2.0, 1e300, 7.0], n),
}


@pytest.mark.parametrize("kind", sorted(IDS))
@pytest.mark.parametrize("values", [(), ("minutes",)])
def test_the_parts_keep_the_rows_the_whole_table_keeps(kind: str, values: tuple[str, ...]) -> None:
    nw = narwhals()
    table = _table(IDS[kind](np.random.default_rng(1), 3000))
    bounding = Bounding(
        id_column="id",
        by=("city",),
        content=None,
        max_rows=2,
        max_groups=2,
        key=BoundingKey.draw(np.random.default_rng(3)),
        values=values,
    )
    whole = bound_eager(nw.from_native(table, eager_only=True), bounding).to_native()
    relation = duckdb.connect().from_arrow(table)
    before = set(Path(tempfile.gettempdir()).glob("dpkit-bounding-*"))
    parted = bounded_in_parts(
        nw.from_native(relation), bounding, spill_rows=1200, batch_rows=500
    ).to_native()
    assert set(Path(tempfile.gettempdir()).glob("dpkit-bounding-*")) == before  # removed
    assert whole.num_rows < table.num_rows  # the bounds bind
    assert _sorted(parted) == _sorted(whole)


def test_a_relation_that_fits_is_bounded_in_memory() -> None:
    nw = narwhals()
    table = _table(np.arange(300) % 40)
    bounding = Bounding("id", ("city",), None, 1, 1, BoundingKey.draw(np.random.default_rng(0)))
    relation = duckdb.connect().from_arrow(table)
    before = set(Path(tempfile.gettempdir()).glob("dpkit-bounding-*"))
    parted = bounded_in_parts(nw.from_native(relation), bounding).to_native()
    whole = bound_eager(nw.from_native(table, eager_only=True), bounding).to_native()
    assert _sorted(parted) == _sorted(whole)
    assert set(Path(tempfile.gettempdir()).glob("dpkit-bounding-*")) == before
