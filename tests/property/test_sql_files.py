"""A SQL statement on a file of any rows: the public phase reads the file's schema only (a CSV
file's header line, a Parquet file's footer), and after it the release never fails, whatever
the rows hold.

* CSV: line breaks of every kind, quotes (closed, unclosed, doubled, inside a field), NUL,
  bytes that are not UTF-8, delimiters too many or too few. Each row's fields are read as
  text, and a statement's TRY makes any value total; the reader itself must be too.
* Parquet: text columns (plain, large, dictionary-encoded) holding bytes that are not UTF-8,
  in row groups of any size. Such a value is missing, as in an Arrow table of the same rows,
  and the release's aggregates are that table's.

False-positive rate: 0 (deterministic; Hypothesis derandomized).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

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


#: Text values of the Parquet rows: valid UTF-8, and bytes that are not (a lone continuation
#: byte, a truncated sequence, an encoded surrogate, an overlong NUL).
TEXTS = [b"a", b"b", b"\xc3\xa9", b"", b"\xff", b"a\xc3", b"\xed\xa0\x80", b"\xc0\x80"]
#: The text columns' Arrow types, each written as Parquet's BYTE_ARRAY with that type stored.
TEXT_TYPES = ["string", "large_string", "dictionary"]


def _text_column(values: list[bytes], kind: str) -> Any:
    """``values`` as an Arrow text column of ``kind`` whose bytes are not checked (built from
    the buffers of a binary array: nothing validates them, as a foreign writer's file)."""
    import pyarrow as pa

    large = kind == "large_string"
    raw = pa.array(values, pa.large_binary() if large else pa.binary())
    text = pa.Array.from_buffers(
        pa.large_string() if large else pa.string(), len(raw), raw.buffers()
    )
    return text.dictionary_encode() if kind == "dictionary" else text


@settings(max_examples=10, **SETTINGS)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(TEXTS), st.sampled_from(TEXTS), st.integers(-3, 9)),
        min_size=1,
        max_size=12,
    ),
    kinds=st.tuples(st.sampled_from(TEXT_TYPES), st.sampled_from(TEXT_TYPES)),
    group_rows=st.integers(1, 12),
)
def test_a_parquet_file_releases_as_the_arrow_table_of_its_rows(
    rows: list[tuple[bytes, bytes, int]], kinds: tuple[str, str], group_rows: int
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    users, cities, minutes = zip(*rows, strict=True)
    table = pa.table(
        {
            "user": _text_column(list(users), kinds[0]),
            "city": _text_column(list(cities), kinds[1]),
            "minutes": pa.array(minutes, pa.int64()),
        }
    )
    statement = (
        "SELECT lower(city) AS c, COUNT(*), SUM(minutes, contribution_bounds_per_group => "
        "(0, 5)) FROM t GROUP BY c"
    )
    options = {"epsilon": 1.0, "privacy_unit_column": "user", "max_groups_contributed": 1}
    keys = ["a", "b", "é", ""]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.parquet"
        pq.write_table(table, path, row_group_size=group_rows)
        on_file, on_table = (
            dpkit.sql(statement, tables={"t": t}, options=options, keys=keys)
            for t in (str(path), table)
        )
        on_file.check_input(None)
        on_file.run(None, rng=np.random.default_rng(0))
        found = on_file.aggregates(rng=np.random.default_rng(1))
    expected = on_table.aggregates(rng=np.random.default_rng(1))
    for a, b in zip(found, expected, strict=True):
        assert a.identical(b), (a.values, b.values)
