"""Reading a CSV after the spend: one malformed record never removes others, progress only grows,
released keys cannot drive the terminal, and the reader's path does not change other records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.mark.parametrize(
    "unclosed",
    [
        '"unclosed note,1\n',  # the merged record is one field wide: PyArrow refuses the file
        'note,"unclosed\n',  # two fields wide, the quote open to the end: PyArrow accepts it
    ],
)
def test_one_record_with_an_unclosed_quote_does_not_remove_the_others(
    rt: Any, tmp_path: Path, unclosed: str
) -> None:
    """Attack: one person's record starts a quoted field and never closes it. Everything
    after it was read as the inside of that field; the merged record had the wrong width and
    was dropped, so a count at ε = 1000 moved by the number of records after that person (50),
    where one record may move it by 1. Records are now framed by lines: a quote cannot span a
    line end, and the open line is one record (here of the wrong width, dropped) alone."""
    counts = []
    for extra in ([], [unclosed]):
        world = tmp_path / str(len(extra))
        world.mkdir()
        rows = [f"r{i},1\n" for i in range(10)] + extra + [f"s{i},1\n" for i in range(50)]
        (world / "data.csv").write_text("note,v\n" + "".join(rows), encoding="utf-8")
        spec = rt.query_spec("count", "v", epsilon=1000.0, session_epsilon=1e6)
        rt.write_json(world / "spec.json", spec)
        result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=world)
        assert result.returncode == 0, result.explain()
        counts.append(result.json()["results"][0]["estimate"])
    assert abs(counts[1] - counts[0]) <= 3, counts


class _LoggedCounter(list[int]):
    """The reader's byte counter, logging every value it takes."""

    def __init__(self) -> None:
        super().__init__([0])
        self.values: list[int] = []

    def __setitem__(self, index: Any, value: Any) -> None:
        self.values.append(value)
        super().__setitem__(index, value)


@pytest.mark.parametrize("malformed", [False, True])
def test_reading_progress_only_grows_whatever_the_records(tmp_path: Path, malformed: bool) -> None:
    """Attack: ``dpkit run --progress`` shows the share of the file read. A file with one
    malformed record (a row of the wrong width) is read a second time, then by the Python
    path; the byte counter was reset to 0 before each attempt, so the percentage shown went
    *down* — a sign on stderr, beyond the read's duration, that some record is malformed. Now
    the counter only grows (the duration itself stays an open timing channel: docs/security)."""
    from dpkit.spec import columnar

    rows = [f"r{i},{i}\n" for i in range(2000)] + (["a,b,c\n"] if malformed else [])
    path = tmp_path / "data.csv"
    path.write_text("note,v\n" + "".join(rows), encoding="utf-8")
    counter = _LoggedCounter()
    with path.open("rb") as handle:
        columnar._read_csv(handle, counter, ["v"], path.stat().st_size, ("note", "v"))
    assert counter.values == sorted(counter.values) and counter.values[-1] > 0


def test_released_keys_cannot_drive_the_terminal(rt: Any, tmp_path: Path) -> None:
    """Attack (by data subjects, on the analyst): 300 people give the city
    ``ESC[31mFAKE ESC[0m`` followed by backspaces. The key is common enough to be released, and
    ``dpkit run`` printed it raw: the terminal ran the escape sequences (colours, cursor
    moves, a right-to-left override), which can redraw the table the analyst reads. Now keys
    and categories are printed with their control characters escaped; ``--json`` escapes them
    anyway."""
    fake = "\x1b[31mFAKE\x1b[0m\x08\x08\u202e"
    rows = [f"u{i},{fake},1\n" for i in range(300)] + [f"v{i},Lyon,1\n" for i in range(300)]
    (tmp_path / "data.csv").write_text("user,city,v\n" + "".join(rows), encoding="utf-8")
    spec = rt.query_spec("count", "v", epsilon=1.0, session_epsilon=100.0)
    spec["session_budget"]["delta"] = 0.01
    spec["group_by"] = {
        "columns": ["city"],
        "keys": "private",
        "selection": {"epsilon": 1.0, "delta": 1e-6},
    }
    rt.write_json(tmp_path / "spec.json", spec)
    result = rt.fork_cli("run", "spec.json", "--ledger", "l.sqlite", cwd=tmp_path)
    assert result.returncode == 0, result.explain()
    assert "FAKE" in result.stdout and "Lyon" in result.stdout
    assert not any(c in result.stdout for c in "\x1b\x08\u202e"), repr(result.stdout)


_ODD_RECORDS = {
    "quote_then_text": b'"ab"cd,1\n',
    "inner_quote": b'ab"cd,1\n',
    "cr_only": b"x,1\ry,2\r",
    "crlf_in_quotes": b'"x\r\ny",1\n',
    "lone_cr_in_quotes": b'"a\rb",1\n',
    "nul": b"x\x00y,1\n",
    "bom_in_body": b"\xef\xbb\xbfq,1\n",
    "quote_space": b'"ab" ,1\n',
    "space_quote": b' "ab",1\n',
    "empty_quoted": b'"",1\n',
    "controls": b"x\x0b,1\n\x0cy,2\n",
    "unicode_separators": "x\u2028y,1\nz\x85w,2\n".encode(),
    "cr_cr_lf": b"x,1\r\r\ny,2\n",
    "invalid_utf8": b"\xff\xfe,1\n",
}


@pytest.mark.parametrize("name", sorted(_ODD_RECORDS))
def test_which_csv_path_runs_does_not_change_other_records(tmp_path: Path, name: str) -> None:
    """Attack (defence holds): one malformed record (a row of the wrong width) sends the whole
    file from PyArrow's reader to Python's csv module. If the two read any *other* record
    differently, that record's cells would depend on whether someone else's row is malformed.
    Every odd record here is read the same by both paths (the malformed row aside)."""
    import os

    from dpkit.spec.columnar import FileTable

    def cells(body: bytes, where: Path) -> list[tuple[Any, Any]]:
        where.mkdir()
        path = where / "data.csv"
        path.write_bytes(body)
        info = os.stat(path)
        table = FileTable(path, (info.st_dev, info.st_ino), 1 << 30, header=("a", "b"))
        table.expect("a", "text")
        table.expect("b", "text")
        a, b = table.converted("a", "text"), table.converted("b", "text")
        return list(zip(a.to_pylist(), b.to_pylist(), strict=True))

    body = b"a,b\n" + _ODD_RECORDS[name] + b"k,9\n"
    arrow = cells(body, tmp_path / "arrow")
    python = cells(body + b"one,too,many\n", tmp_path / "python")
    assert arrow == python and arrow[-1] == ("k", "9")
