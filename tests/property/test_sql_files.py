"""A SQL statement on a CSV file of any rows: the public phase reads the header line only, and
after it the release never fails, whatever bytes the rows hold — line breaks of every kind,
quotes (closed, unclosed, doubled, inside a field), NUL, bytes that are not UTF-8, delimiters
too many or too few. Each row's fields are read as text, and a statement's TRY makes any
value total; the reader itself must be too.

False-positive rate: 0 (deterministic; Hypothesis derandomized).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.table_cases import SETTINGS

import dpkit

pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

#: The bytes CSV parsing turns on, and some that are not UTF-8.
PIECES = [b",", b'"', b"\n", b"\r", b"\r\n", b"a", b"1", b"\xff", b"\xc3", b"\x00", b" ", b"\\"]


@settings(max_examples=12, **SETTINGS)
@given(rows=st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join))
def test_no_csv_row_fails_the_release(rows: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.csv"
        path.write_bytes(b"user,city,minutes\n" + rows)
        query = dpkit.sql(
            "SELECT city, COUNT(*), SUM(TRY_CAST(minutes AS DOUBLE), "
            "contribution_bounds_per_group => (0, 9)) FROM t GROUP BY city",
            tables={"t": str(path)},
            options={"epsilon": 1.0, "delta": 1e-6, "privacy_unit_column": "user"}
            | {"max_groups_contributed": 1},
        )
        query.check_input(None)
        query.run(None, rng=np.random.default_rng(0))
