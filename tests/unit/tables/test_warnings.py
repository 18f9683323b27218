"""Opening and querying a table leaves the user's warning filters as they were.

narwhals warns that its Dask support is moving to another package, and PySpark 4 that it does
not fully support pandas 3: notices about library versions that dpkit silences only around its
own calls that emit them (dpkit/tables/_quiet.py), never by adding to the process's filters.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from dpkit_central import Histogram, Sum

import dpkit
from dpkit.tables._quiet import VERSION_WARNINGS, quiet

dd = pytest.importorskip("dask.dataframe")


def _people() -> pd.DataFrame:
    rows = 60
    return pd.DataFrame(
        {
            "user": np.arange(rows) % 9,
            "city": np.where(np.arange(rows) % 3 == 0, "Lyon", "Paris"),
            "amount": np.linspace(0.0, 5.0, rows),
            "mode": np.array(["walk", "bus", "car", "bike"])[np.arange(rows) % 4],
        }
    )


def test_a_dask_query_leaves_the_filters_unchanged_and_the_notices_unseen() -> None:
    """A session's release on a Dask table (as_frame, per-record steps, the shuffle-by-id
    bounding, a histogram's position lookup) under a user's own filters: afterwards
    ``warnings.filters`` is the very list it was, and neither version notice was shown
    (deterministic: false-positive rate 0)."""
    table = dd.from_pandas(_people(), npartitions=3)
    unit = dpkit.IdUnit("user", max_rows=2, max_groups=1)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        warnings.filterwarnings("error", message="a filter of the user's own")
        before = list(warnings.filters)
        session = dpkit.Session(budget=(10, 0), ledger=":memory:")
        for query in (
            Sum(lower=0, upper=5, epsilon=1.0).on("amount", by="city", keys=["Lyon"], unit=unit),
            Histogram(categories=["walk", "bus"], epsilon=1.0).on("mode", unit=unit),
        ):
            session.release(query, table, rng=np.random.default_rng(3))
        after = list(warnings.filters)
    assert after == before
    notices = [str(w.message) for w in shown if str(w.message).startswith(VERSION_WARNINGS)]
    assert notices == []


def test_quiet_ignores_the_two_notices_only_and_only_inside_its_block() -> None:
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        before = list(warnings.filters)
        with quiet():
            for message in VERSION_WARNINGS:
                warnings.warn(message + " (a version notice)", FutureWarning, stacklevel=1)
            warnings.warn("another FutureWarning", FutureWarning, stacklevel=1)
        assert list(warnings.filters) == before
        for message in VERSION_WARNINGS:
            warnings.warn(message + " (a version notice)", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in shown] == [
        "another FutureWarning",
        *(message + " (a version notice)" for message in VERSION_WARNINGS),
    ]
