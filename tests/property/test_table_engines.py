"""One logical table, the same pre-noise aggregates on every engine, bit for bit.

For every registered statistic (read from the registry) on adversarial tables (ids and keys
spelled across types, object columns mixing them, every Arrow type, odd chunkings;
:mod:`dpkit.testing.strategies`), the table is built on every engine that can hold it —
PyArrow (and read back from Parquet, one row group per chunk, text as dictionaries), pandas
(NumPy and Arrow dtypes), Polars, and Dask from that pandas frame (``dataframe.convert-string``
off and on, one partition per chunk, so partitions split a person's rows) — and
``query.aggregate`` with one seed must give :meth:`Aggregates.identical` results on all of
them: the same keys and the same values, array by array, bit for bit. A person's rows, a
group's rows and a key's meaning may not depend on the engine that holds the table.

An engine whose aggregate raises is ``test_table_total.py``'s finding and is left out of the
comparison here, so that it cannot hide a finding of this property.

False-positive rate: 0. The aggregates are deterministic given the table and seed (the
bounding key comes from the seed; sums are exact fixed-point integers), and Hypothesis is
derandomized: the same examples run on every machine.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from table_cases import (
    DASK,
    DASK_GROUPS,
    DASK_IDS,
    EAGER,
    SETTINGS,
    STATISTICS,
    Case,
    accepted,
    aggregated,
    cases,
    native,
)

EXAMPLES = 25  # per statistic, each on every eager engine
DASK_EXAMPLES = 12  # over every statistic, on pandas and both Dask variants


def check_engines(case: Case, engines: tuple[str, ...]) -> None:
    query = case.query
    found = {}
    for engine in engines:
        frame = native(case.table, engine)
        if frame is not None and accepted(query, frame):
            aggregates = aggregated(case, frame)
            if aggregates is not None:
                found[engine] = aggregates
    event(f"{len(found)} engines compared")
    if len(found) < 2:
        return
    (first, reference), *others = found.items()
    differ = {engine: a for engine, a in others if not reference.identical(a)}
    assert not differ, "\n".join(
        [f"{first}: keys {reference.keys}, values {reference.values}"]
        + [f"{engine}: keys {a.keys}, values {a.values}" for engine, a in differ.items()]
    )


@pytest.mark.parametrize("name", STATISTICS)
@settings(max_examples=EXAMPLES, **SETTINGS)
@given(data=st.data())
def test_every_engine_gives_identical_aggregates(name: str, data: Any) -> None:
    check_engines(data.draw(cases(name), label="case"), EAGER)


@pytest.mark.cluster
@settings(max_examples=DASK_EXAMPLES, **SETTINGS)
@given(data=st.data())
def test_dask_gives_the_aggregates_of_its_pandas_frame(dask_client: Any, data: Any) -> None:
    name = data.draw(st.sampled_from(STATISTICS), label="statistic")
    check_engines(
        data.draw(cases(name, ids=DASK_IDS, group_storages=DASK_GROUPS), label="case"),
        ("pandas", *DASK),
    )
