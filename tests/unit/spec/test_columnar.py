"""The columnar reader of spec inputs (:mod:`dpkit.spec.columnar`): total, per cell, and the
same whichever path runs (PyArrow's parser or the Python fallback; the plain float cast or the
decimal patterns), and each file read once per spec."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit
from dpkit.spec import columnar, plan_spec, run_spec
from dpkit.spec.data import _header, _records

PIECES = [b"1", b"2", b",", b'"', b"\n", b"\r", b" ", b"\x00", b"a", b"\xe9", b"\r\n", b"-", b"."]


def _both(raw: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the reader's cells, the Python csv module's cells under the documented rules)."""
    header = next(_records(io.StringIO(raw.decode("utf-8-sig", errors="replace"), newline="")), [])
    wanted = sorted(set(header))
    read = columnar._read_csv(
        io.BufferedReader(io.BytesIO(raw)), [0], wanted, len(raw), tuple(header)
    )
    python: dict[str, list[bytes]] = {name: [] for name in wanted}
    for row in columnar._python_records(io.BufferedReader(io.BytesIO(raw)), len(header)):
        for name in wanted:
            python[name].append(row[header.index(name)].encode("utf-8", "surrogateescape"))
    return {k: v.to_pylist() for k, v in read.items()}, python


@settings(max_examples=400, deadline=None)
@given(
    body=st.lists(st.sampled_from(PIECES), max_size=30).map(b"".join),
    scan=st.sampled_from([columnar.SCAN_BYTES, 1, 2, 3, 7]),
)
def test_pyarrow_and_python_paths_read_the_same_cells(body: bytes, scan: int) -> None:
    """Random bodies of digits, commas, quotes, CR/LF, NUL, invalid UTF-8: whichever path
    reads the file (PyArrow when it parses and its records are the lines, Python line by line
    otherwise), the cells are the Python csv module's of each line alone, records of the wrong
    width dropped — also when the check of the lines reads the file a few bytes at a time."""
    with mock.patch.object(columnar, "SCAN_BYTES", scan):
        read, python = _both(b"a,b\n" + body)
    assert read == python


@settings(max_examples=300, deadline=None)
@given(
    body=st.lists(st.sampled_from(PIECES), max_size=30).map(b"".join),
    scan=st.integers(1, 9),
    offset=st.sampled_from([-1, 0, 1]),
)
def test_the_line_check_read_in_blocks_is_the_rule_on_the_whole_file(
    body: bytes, scan: int, offset: int
) -> None:
    """``_line_framed`` (the file in blocks of a few bytes) against the rule on the whole
    file at once: no quote at all, or one non-empty line per record plus the header's, and a
    last line that leaves no quote open (a regular expression finds the lines here)."""
    raw = b"a,b\n" + body
    lines = re.findall(rb"[^\r\n]+", raw)
    records = len(lines) - 1 + offset
    last = lines[-1].decode("utf-8", "surrogateescape")
    reader = csv.reader((last, "x"), strict=False)
    next(reader)
    expected = b'"' not in raw or (len(lines) == records + 1 and reader.line_num == 1)
    with mock.patch.object(columnar, "SCAN_BYTES", scan):
        found = columnar._line_framed(io.BufferedReader(io.BytesIO(raw)), 0, len(raw), records)
    assert found == expected


def test_a_record_longer_than_a_block_is_read(capfd: pytest.CaptureFixture[str]) -> None:
    raw = b"a,b\n1," + b"x" * (columnar.BLOCK_BYTES + 10) + b"\n2,\xe9\n3\n"
    read, python = _both(raw)
    assert read == python and read["a"] == [b"1", b"2"]
    assert capfd.readouterr().err == ""  # nothing printed, whatever the bytes


NUMBERS = st.text(alphabet="0123456789+-.eE infINFaN_x\t", max_size=8)


@settings(max_examples=500, deadline=None)
@given(cell=NUMBERS)
def test_the_plain_cast_agrees_with_the_decimal_patterns(cell: str) -> None:
    """A cell alone may take the plain float cast; next to a non-number it takes the patterns.
    Both give the same value (NaN for missing)."""
    alone = columnar.numbers(pa.array([cell.encode()], pa.binary())).to_pylist()[0]
    patterned = columnar.numbers(pa.array([cell.encode(), b"not a number"], pa.binary()))
    value = patterned.to_pylist()[0]
    assert (math.isnan(alone) and math.isnan(value)) or alone == value


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        (b"1.5", 1.5), (b" -2 ", -2.0), (b"+.5e1", 5.0), (b"5.", 5.0), (b"1e999", math.inf),
        (b"-Infinity", -math.inf), (b"inf", math.inf), (b"", math.nan), (b"NA", math.nan),
        (b"nan", math.nan), (b"1_000", math.nan), (b"4\x000", math.nan), (b"\xe91", math.nan),
        (b"0x10", math.nan), (b"1,5", math.nan),
    ],
)  # fmt: skip
def test_numbers(cell: bytes, expected: float) -> None:
    for cells in ([cell], [cell, b"x"]):
        got = columnar.numbers(pa.array(cells, pa.binary())).to_pylist()[0]
        assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_labels_and_ids() -> None:
    cells = pa.array([b" bus ", b"NA", b"", b"\xe9t\xe9", b"NA", b"bus"], pa.binary())
    assert columnar.labels(cells).to_pylist() == ["bus", None, None, "\ufffdt\ufffd", None, "bus"]
    assert columnar.labels(cells, keep=("NA",)).to_pylist()[1] == "NA"
    codes = columnar.ids(cells).to_pylist()
    assert codes[2] is None and codes[0] != codes[5] and codes[1] == codes[4]
    for extra in ([], [b"x"]):  # a cell's id never depends on the other cells
        cells = pa.array([b"7", b"007", b"", b"12", b"+7", b"-0", b"0", b"07x", *extra])
        numbers = columnar.ids(cells.cast(pa.binary())).to_pylist()
        assert numbers[0] == numbers[1] == numbers[4] and numbers[5] == numbers[6]
        assert numbers[2] is None and len({numbers[0], numbers[3], numbers[5], numbers[7]}) == 4


def test_an_id_code_is_a_function_of_its_cell_alone() -> None:
    """Contribution bounding keys each person's priorities on their id code, so a code must
    not move when other people are added (a dictionary index in order of first appearance
    did: one new person at the top shifted everyone's code, and with it which of their rows
    were kept). Each cell's code, read alone, equals its code within any column."""
    cells = [b"7", b"007", b"alice", b"+7", b"bob", b"0x10", b"99999999999999999999", b"-3"]
    alone = [columnar.ids(pa.array([cell], pa.binary())).to_pylist()[0] for cell in cells]
    for column in (cells, [b"zed", *cells], [b"12", *cells], cells[::-1]):
        found = columnar.ids(pa.array(column, pa.binary())).to_pylist()
        codes = dict(zip(column, found, strict=True))
        assert [codes[cell] for cell in cells] == alone
    assert alone[0] == alone[1] == alone[3] == 7 and alone[7] == -3
    # a column of integers is one cast, which would read 0X10 as 16: it is text, as alone
    hexadecimal = columnar.ids(pa.array([b"0X10"], pa.binary())).to_pylist()[0]
    assert columnar.ids(pa.array([b"7", b"0X10"], pa.binary())).to_pylist() == [7, hexadecimal]
    assert hexadecimal != 16
    big = columnar.ids(pa.array([2**64 - 1, 3], pa.uint64())).to_pylist()
    assert big == [-1, 3]  # the same 64 bits, whatever the other values


CELLS = st.sampled_from(
    [b"", b"7", b"007", b" 1.5 ", b"-inf", b"NA", b"nan", b"bus", b"x", b"0x10", b"\xe9", b"+7"]
)


@settings(max_examples=200, deadline=None)
@given(cells=st.lists(CELLS, max_size=12), cuts=st.lists(st.integers(0, 12), max_size=4))
def test_conversions_read_chunks_as_one_array(cells: list[bytes], cuts: list[int]) -> None:
    """The reader hands over its blocks as chunks; each conversion is per cell, so converting
    a column chunk by chunk gives what converting it whole gives."""
    edges = sorted({0, len(cells), *(min(c, len(cells)) for c in cuts)})
    chunked = pa.chunked_array(
        [pa.array(cells[a:b], pa.binary()) for a, b in itertools.pairwise(edges)], pa.binary()
    )
    whole = pa.array(cells, pa.binary())
    for convert in (columnar.numbers, columnar.labels, columnar.ids, columnar.texts):
        left, right = convert(chunked).to_pylist(), convert(whole).to_pylist()
        assert [None if v != v else v for v in left] == [None if v != v else v for v in right]


#: The layouts a Parquet file (or a table) can hold bytes in, besides ``binary``.
LAYOUTS = (pa.large_binary(), pa.binary_view(), pa.dictionary(pa.int32(), pa.binary()))


@settings(max_examples=40, deadline=None)
@given(cells=st.lists(CELLS, max_size=8), layout=st.sampled_from(LAYOUTS))
def test_every_layout_of_bytes_reads_the_cells_of_binary(cells: list[bytes], layout: Any) -> None:
    """A large, view or dictionary-encoded column of bytes is read as the same cells as a
    ``binary`` one: its bytes are not cast to text first, which failed (after the spend) on a
    cell that is not UTF-8."""
    plain = pa.array(cells, pa.binary())
    held = plain.cast(layout) if not pa.types.is_dictionary(layout) else plain.dictionary_encode()
    fixed = pa.array([c.ljust(5, b"_")[:5] for c in cells], pa.binary(5))
    for convert in (columnar.numbers, columnar.labels, columnar.ids, columnar.texts):
        for left, right in ((held, plain), (fixed, fixed.cast(pa.binary()))):
            found, expected = convert(left).to_pylist(), convert(right).to_pylist()
            assert [None if v != v else v for v in found] == [
                None if v != v else v for v in expected
            ]


def _spec(tmp_path: Path, queries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "dpkit": "1",
        "budget": {"epsilon": 100},
        "defaults": {
            "input": {"source": "csv", "path": "d.csv", "column": "x"},
            "rng": {"mode": "fast", "seed": 1},
        },
        "queries": queries,
    }


def test_each_file_is_read_once_whatever_the_number_of_queries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "d.csv").write_text(
        "x,g,u\n" + "".join(f"{i},{i % 3},{i % 7}\n" for i in range(100))
    )
    reads: list[list[str]] = []
    real = columnar._read_csv

    def counting(
        handle: Any, counter: Any, wanted: list[str], size: int, header: Any, *rest: Any
    ) -> Any:
        reads.append(wanted)
        return real(handle, counter, wanted, size, header, *rest)

    monkeypatch.setattr(columnar, "_read_csv", counting)
    unit = {"kind": "id", "column": "u", "max_rows": 2, "max_groups": 1}  # one per spec
    queries = [
        {"statistic": "count", "privacy_unit": unit, "budget": {"epsilon": 1}},
        {
            "statistic": "sum",
            "params": {"lower": 0, "upper": 99},
            "privacy_unit": unit,
            "budget": {"epsilon": 1},
        },
        {
            "statistic": "mean",
            "params": {"lower": 0, "upper": 99},
            "group_by": {"columns": ["g"], "keys": ["0", "1", "2"]},
            "privacy_unit": unit,
            "budget": {"epsilon": 1},
        },
    ]
    document = run_spec(_spec(tmp_path, queries), base_dir=tmp_path, ledger=tmp_path / "l.sqlite")
    assert len(document["results"]) == 3
    assert reads == [["g", "u", "x"]]  # one pass, only the needed columns


def test_a_file_read_in_many_blocks_gives_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(3)
    rows = [
        f"{x},{g},{u}\n"
        for x, g, u in zip(
            rng.choice(["1.5", "", "NA", "7", " 3 ", "x"], 4000),
            rng.choice(["a", "b", " c", "", "NA"], 4000),
            rng.choice(["1", "007", "alice", "", "7", "0x7"], 4000),
            strict=True,
        )
    ]
    (tmp_path / "d.csv").write_text("x,g,u\n" + "".join(rows))
    unit = {"kind": "id", "column": "u", "max_rows": 2, "max_groups": 1}  # one per spec
    queries = [
        {"statistic": "count", "privacy_unit": unit, "budget": {"epsilon": 1}},
        {
            "statistic": "sum",
            "params": {"lower": 0, "upper": 9},
            "privacy_unit": unit,
            "budget": {"epsilon": 1},
        },
        {
            "statistic": "mean",
            "params": {"lower": 0, "upper": 9},
            "group_by": {"columns": ["g"], "keys": ["a", "b", "c"]},
            "privacy_unit": unit,
            "budget": {"epsilon": 1},
        },
        {
            "statistic": "count",
            "group_by": {
                "columns": ["g"],
                "keys": "private",
                "selection": {"epsilon": 1, "delta": 1e-6},
            },
            "privacy_unit": unit,
            "budget": {"epsilon": 1},
        },
    ]
    spec = {**_spec(tmp_path, queries), "budget": {"epsilon": 100, "delta": 1e-5}}
    results = []
    for block in (columnar.BLOCK_BYTES, 1 << 10):  # one block, then some 40
        monkeypatch.setattr(columnar, "BLOCK_BYTES", block)
        document = run_spec(spec, base_dir=tmp_path, ledger=tmp_path / f"{block}.sqlite")
        results.append(
            [{k: v for k, v in r.items() if k != "release_id"} for r in document["results"]]
        )
    assert len(results[0]) == 4
    assert results[0] == results[1]


def test_parquet_inputs(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    table = pa.table(
        {"x": [1.0, 2.0, None, 4.0], "g": ["a", "b", "a", None], "other": [1, 2, 3, 4]}
    )
    pq.write_table(table, tmp_path / "d.parquet")
    spec = _spec(
        tmp_path,
        [
            {
                "statistic": "sum",
                "params": {"lower": 0, "upper": 10},
                "group_by": {"columns": ["g"], "keys": ["a", "b"]},
                "budget": {"epsilon": 1},
            }
        ],
    )
    spec["defaults"]["input"] = {"source": "parquet", "path": "d.parquet", "column": "x"}
    plan = plan_spec(spec, registry=dpkit.get_registry(), base_dir=tmp_path)
    (query,) = plan.queries
    assert query.target.aggregate(query.load()).values["sum"].tolist() == [1.0, 2.0]
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    spec["defaults"]["input"]["path"] = "bad.parquet"
    with pytest.raises(dpkit.spec.SpecInvalid) as info:
        plan_spec(spec, registry=dpkit.get_registry(), base_dir=tmp_path)
    assert [i.code for i in info.value.issues] == ["bad_header"]
    json.dumps(spec)


def test_a_parquet_file_of_large_bytes_is_released(tmp_path: Path) -> None:
    """Attack: a Parquet file whose id, group and value columns are ``large_binary`` (what
    pandas and PyArrow write for large bytes), one person's cells not UTF-8. They were cast to
    text, so the release failed after the spend; now they are read as their bytes."""
    import pyarrow.parquet as pq

    cells = [b"1", b"2", b"\xe9", b"3"]
    column = pa.array(cells, pa.large_binary())
    pq.write_table(pa.table({"x": column, "g": column, "id": column}), tmp_path / "d.parquet")
    spec = _spec(
        tmp_path,
        [
            {
                "statistic": "sum",
                "params": {"lower": 0, "upper": 10},
                "group_by": {"columns": ["g"], "keys": ["1", "2"]},
                "privacy_unit": {"kind": "id", "column": "id", "max_rows": 1, "max_groups": 1},
                "budget": {"epsilon": 1},
            }
        ],
    )
    spec["defaults"]["input"] = {"source": "parquet", "path": "d.parquet", "column": "x"}
    run_spec(spec, base_dir=tmp_path, ledger=str(tmp_path / "l.sqlite"))
    plan = plan_spec(spec, registry=dpkit.get_registry(), base_dir=tmp_path)
    (query,) = plan.queries
    assert query.target.aggregate(query.load()).values["sum"].tolist() == [1.0, 2.0]


def test_header_is_parsed_as_the_reader_parses_it(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_bytes(b'\xef\xbb\xbf"a,b",c\r1,2\r')
    header, _identity, problem = _header(tmp_path / "d.csv", "d.csv", "/input")
    assert problem is None and header == ["a,b", "c"]
    read, python = _both((tmp_path / "d.csv").read_bytes())
    assert read == python == {"a,b": [b"1"], "c": [b"2"]}
    assert np.isnan(columnar.numbers(pa.array([b"x"], pa.binary())).to_pylist()[0])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # A quoted value cannot span lines: each line is its own record, parsed alone.
        (b'1,"x\ny"\n2,3\n', {"a": [b"1", b"2"], "b": [b"x", b"3"]}),
        # An open quote on the last line, with or without line ends after it.
        (b'1,2\n3,"open\n\n', {"a": [b"1", b"3"], "b": [b"2", b"open"]}),
        (b'1,2\n3,"open', {"a": [b"1", b"3"], "b": [b"2", b"open"]}),
        # CR and CRLF line ends frame records too; doubled quotes and quoted commas stay.
        (
            b'1,"p,q"\r2,"r""s"\r\n3,"t\r4,5',
            {"a": [b"1", b"2", b"3", b"4"], "b": [b"p,q", b'r"s', b"t", b"5"]},
        ),
        # A line of the wrong width is dropped alone.
        (b'"one field, open\n1,2\n3,4\n', {"a": [b"1", b"3"], "b": [b"2", b"4"]}),
    ],
)
def test_records_are_framed_by_lines(
    tmp_path: Path, body: bytes, expected: dict[str, list[bytes]]
) -> None:
    """A record is one line (LF, CRLF or CR), so a quote left open by one record never
    swallows the records after it (RFC 4180's quoted line ends are not accepted: the
    privacy unit of a CSV file is a line). Read from a file on disk (the mapped path)."""
    (tmp_path / "d.csv").write_bytes(b"a,b\n" + body)
    with open(tmp_path / "d.csv", "rb") as handle:
        read = columnar._read_csv(handle, [0], ["a", "b"], len(body) + 4, ("a", "b"))
    assert {k: v.to_pylist() for k, v in read.items()} == expected
    assert _both(b"a,b\n" + body)[1] == expected


def test_a_long_last_line_with_an_open_quote_is_read_whatever_the_csv_limit(
    tmp_path: Path,
) -> None:
    """The line check parses the last line with Python's csv module, whose field size limit
    is process-wide (128 KiB by default) and was lifted only as a side effect of reading a
    header: the check lifts it itself, so a long last field cannot make the reader raise."""
    body = b'1,2\n3,"' + b"x" * 200_000 + b"\n"
    (tmp_path / "d.csv").write_bytes(b"a,b\n" + body)
    before = csv.field_size_limit()
    try:
        csv.field_size_limit(131072)
        with open(tmp_path / "d.csv", "rb") as handle:
            read = columnar._read_csv(handle, [0], ["a", "b"], len(body) + 4, ("a", "b"))
    finally:
        csv.field_size_limit(before)
    assert read["a"].to_pylist() == [b"1", b"3"]
    assert read["b"].to_pylist() == [b"2", b"x" * 200_000]


def test_a_nan_id_of_a_float_column_is_missing_not_one_person() -> None:
    """A typed float id column (a Parquet file's): NaN is missing, as null is and as the table
    queries read it; were it the id "nan", every row without an id would be one person."""
    cells = pa.chunked_array([[1.0, math.nan, None], [math.nan, 2.5, -0.0]])
    codes = columnar.ids(cells).to_pylist()
    assert codes[0] == 1 and codes[1] is None and codes[2] is None and codes[3] is None
    assert codes[4] is not None and codes[5] == 0
