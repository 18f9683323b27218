"""A query's input, in two phases: a public check of the file, then a total read of the columns.

**Public phase** (:func:`open_input`, before any spend). Only what is not private is looked at:
where the file is, what kind of file it is, its size, and its header (the column names: a CSV's
first record, a Parquet file's schema).

* ``input.path`` is resolved against the spec's directory and must stay inside the *data root*
  (the spec's directory, or ``--data-root``): absolute paths, and relative ones that lead out of
  the root (by ``..`` or through symbolic links), are refused unless the caller allows any path. A file named on the command
  line (``--data``) was chosen by the person running the command and may be anywhere.
* Only regular files are read: a directory, FIFO, socket or device (``/dev/zero``) is refused
  from its ``stat``, without opening it; so is a file over the size limit.
* The header is read (one line, at most :data:`MAX_HEADER_BYTES`; a Parquet file's schema from
  its footer); every column the query needs — the value column, the group columns, the id
  column — must be in it, exactly once. A missing column is named, with the file's name, but
  the header's contents are never echoed (the "header" of a file that is not a CSV is its first
  line of data).

**Private phase** (after the spend). Each file is read once for all the queries of a spec, in
one columnar pass over the columns they need (:class:`dpkit.spec.columnar.FileTable`), and
reading is *total*: nothing in it raises, and nothing it reports depends on the values. Every
cell is converted on its own (per record, so removing one record changes one value) by the
rules of :mod:`dpkit.spec.columnar`: a cell that is not a number in a numeric column is
missing, bytes that are not UTF-8 are replaced, a record with the wrong number of fields is
dropped. What the statistic does with missing values is its declared policy (``nan``).
"""

from __future__ import annotations

import csv
import difflib
import io
import math
import os
import stat
import sys
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import MissingDependency
from dpkit.spec import columnar
from dpkit.spec.issues import SpecIssue

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "MAX_HEADER_BYTES",
    "ColumnSource",
    "DataPolicy",
    "check_path",
    "encode_categories",
    "match_categories",
    "open_input",
    "open_regular",
]

#: Files larger than this are refused before reading, unless the caller raises the limit.
DEFAULT_MAX_INPUT_BYTES = 4 << 30
#: The CSV header must fit in this many bytes.
MAX_HEADER_BYTES = 1 << 20

Kind = Literal["number", "label", "text"]
#: The columnar conversion behind each way of reading a column as values.
_READ_AS = {"number": "numbers", "label": "labels", "text": "text"}
_MISSING = ("", "na", "nan", "null", "none")


@attrs.frozen
class DataPolicy:
    """Where input files may come from, decided by whoever runs the spec (not by the spec).

    ``root``: the directory spec paths must stay inside (default: the spec's directory);
    ``allow_any_path``: accept absolute paths and ``..`` escapes; ``max_bytes``: the largest
    file read; ``progress``: called as ``progress(bytes_read, total_bytes)`` while a file is
    read (from the file's public size and the bytes read so far, never from its values).
    """

    root: Path | None = None
    allow_any_path: bool = False
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES
    progress: columnar.Progress | None = None


@attrs.frozen
class ColumnSource:
    """One query's input: inline JSON values, or columns of a checked CSV or Parquet file (read
    once per spec through ``table``, shared by every query of that file)."""

    name: str
    path: Path | None = None
    column: str | None = None
    inline: tuple[Any, ...] = ()
    table: columnar.FileTable | None = attrs.field(default=None, eq=False, repr=False)

    def read(self, kind: Kind) -> NDArray[Any]:
        """The column's values (private phase; total): floats with NaN for missing cells
        (``kind="number"``); Python values with None for missing ones (``"label"``: a cell
        that reads as an integer is one); or the cells' text as written (``"text"``)."""
        if self.table is None or self.column is None:
            cells = list(self.inline)
            if kind == "number":
                return np.fromiter((_number(c) for c in cells), dtype=np.float64, count=len(cells))
            out = np.empty(len(cells), dtype=object)
            out[:] = [_label(c) for c in cells] if kind == "label" else cells
            return out
        how = _READ_AS[kind]
        converted = columnar.as_numpy(self.table.converted(self.column, how))
        return _labels_to_values(converted) if kind == "label" else converted

    def expect(self, needed: dict[str, tuple[str, tuple[str, ...]]] | None, kind: str) -> None:
        """Plan time: tell the file which conversions this query will read — its table
        columns (``needed``), or its value column read as ``kind``."""
        if self.table is None or self.column is None:
            return
        if needed is not None:
            for name, (how, keep) in needed.items():
                self.table.expect(name, how, keep)
        else:
            self.table.expect(self.column, _READ_AS[kind])

    def frame(self, needed: dict[str, tuple[str, tuple[str, ...]]]) -> Any:
        """A PyArrow table of the ``needed`` columns, each converted as asked (``numbers``,
        ``labels`` keeping some texts, or ``ids``; :mod:`dpkit.spec.columnar`); private
        phase, total (a column missing from a changed file is empty)."""
        pa = columnar.pyarrow()
        if self.table is None:
            return pa.Table.from_arrays([], names=[])
        arrays = {
            name: self.table.converted(name, how, keep) for name, (how, keep) in needed.items()
        }
        rows = min((len(a) for a in arrays.values()), default=0)
        # from_arrays, not pa.table(dict), which imports pandas to inspect the values
        return pa.Table.from_arrays(
            [array.slice(0, rows) for array in arrays.values()], names=list(arrays)
        )


def _labels_to_values(texts: NDArray[Any]) -> NDArray[Any]:
    """Stripped cell texts → the value a category list would hold (int if the text is one)."""
    cache: dict[str, Any] = {}
    out = np.empty(texts.shape[0], dtype=object)
    for i, text in enumerate(texts.tolist()):
        if text is None:
            out[i] = None
        elif text in cache:
            out[i] = cache[text]
        else:
            out[i] = cache[text] = _label(text)
    return out


def open_regular(path: Path) -> io.BufferedReader | None:
    """``path`` opened for reading if it is (still) a regular file, else None.

    Opened non-blocking and checked with ``fstat`` on the open descriptor, so a file swapped
    for a FIFO or device after its ``stat`` can never block or flood the reader.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return io.BufferedReader(io.FileIO(fd, "rb"))


def _number(cell: Any) -> float:
    if cell is None or isinstance(cell, bool):
        return math.nan if cell is None else float(cell)
    if isinstance(cell, (int, float)):
        return float(cell)
    text = str(cell).strip()
    if text.lower() in _MISSING:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan  # not a number in a numeric column: missing


def _label(cell: Any) -> Any:
    """A CSV cell as the value a category list would hold: int if it reads as one, else text."""
    if not isinstance(cell, str):
        return cell
    text = cell.strip()
    if text.lower() in _MISSING:
        return None
    try:
        return int(text)
    except ValueError:
        return text


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _file_issue(path: Path, shown: str, policy: DataPolicy, at: str) -> SpecIssue | None:
    """Public checks of a data file from its ``stat`` alone (it is never opened here)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return SpecIssue(at, "data_missing", f"no such file: {shown}")
    except OSError as error:
        return SpecIssue(at, "data_unreadable", f"cannot open {shown}: {error.strerror}")
    if not stat.S_ISREG(info.st_mode):
        what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        return SpecIssue(
            at, "data_not_a_file", f"{shown} is {what}; only regular CSV files are read"
        )
    if info.st_size > policy.max_bytes:
        return SpecIssue(
            at,
            "data_too_large",
            f"{shown} is {info.st_size} bytes, over the limit of {policy.max_bytes} bytes "
            "(raise it with --max-input-bytes)",
        )
    return None


def _cannot_open(shown: str, at: str) -> tuple[None, None, SpecIssue]:
    """The public-phase refusal of an input that is not a regular file one can open."""
    return None, None, SpecIssue(at, "data_unreadable", f"cannot open {shown} as a regular file")


def _header(
    path: Path, shown: str, at: str
) -> tuple[list[str] | None, tuple[int, int] | None, SpecIssue | None]:
    """The header record, parsed exactly as the private reader will parse it (so a file whose
    lines end in CR alone, or whose body is not UTF-8, gives the same answer as any other),
    and the identity of the file it was read from."""
    handle = open_regular(path)
    if handle is None:
        return _cannot_open(shown, at)
    with handle:
        info = os.fstat(handle.fileno())
        raw = handle.read(MAX_HEADER_BYTES)
    if (
        len(raw) == MAX_HEADER_BYTES
        and info.st_size > MAX_HEADER_BYTES
        and not (b"\n" in raw or b"\r" in raw)
    ):
        return (
            None,
            None,
            SpecIssue(
                at,
                "bad_header",
                f"{shown}: the header line is longer than {MAX_HEADER_BYTES} bytes",
            ),
        )
    text = raw.decode("utf-8-sig", errors="replace")
    header = next(_records(io.StringIO(text, newline="")), [])
    return header, (info.st_dev, info.st_ino), None


def _records(text: Any) -> Iterator[list[str]]:
    """CSV records of a text stream, never raising (no field size limit)."""
    csv.field_size_limit(sys.maxsize if sys.maxsize < 2**63 else 2**62)
    reader = csv.reader(text, strict=False)
    try:
        yield from reader
    except csv.Error:
        return


def _parquet_header(
    path: Path, shown: str, at: str
) -> tuple[list[str] | None, tuple[int, int] | None, SpecIssue | None]:
    """A Parquet file's column names, from its footer (the schema only), and its identity."""
    handle = open_regular(path)
    if handle is None:
        return _cannot_open(shown, at)
    with handle:
        info = os.fstat(handle.fileno())
        names = columnar.parquet_columns(handle)
    if names is None:
        return None, None, SpecIssue(at, "bad_header", f"{shown} is not a readable Parquet file")
    return names, (info.st_dev, info.st_ino), None


def _unreadable_issues(path: Path, shown: str, wanted: dict[str, str]) -> list[SpecIssue]:
    """The wanted columns of a Parquet file whose type no query can read (a list, a struct):
    refused from the footer's schema before the spend, not failed after it."""
    handle = open_regular(path)
    if handle is None:
        return []
    with handle:
        unreadable = columnar.parquet_unreadable(handle)
    return [
        SpecIssue(
            pointer,
            "column_type",
            f"column {column!r} of {shown} has the type {unreadable[column]}, which has no "
            "text or number form: give a column of numbers, text or booleans",
        )
        for column, pointer in wanted.items()
        if column in unreadable
    ]


def _allowed_path(
    given: str, *, at: str, base_dir: Path, policy: DataPolicy
) -> tuple[Path | None, list[SpecIssue]]:
    """A spec's relative path under ``base_dir``, if it stays inside the data root."""
    path = base_dir / given
    root = (policy.root or base_dir).resolve()
    if not policy.allow_any_path and (
        Path(given).is_absolute() or not _inside(path.resolve(), root)
    ):
        return None, [
            SpecIssue(
                at,
                "path_not_allowed",
                f"input.path {given!r} leads outside the data root (the spec's "
                "directory, or --data-root): give a relative path that stays inside it, "
                "or pass --data-root DIR or --allow-any-path",
            )
        ]
    return path, []


def check_path(
    given: str, *, at: str, base_dir: Path, policy: DataPolicy
) -> tuple[Path | None, list[SpecIssue]]:
    """The public checks of a file a spec names (``at`` points at its path): inside the data
    root, a regular file no larger than the policy allows — from its ``stat`` alone."""
    path, issues = _allowed_path(given, at=at, base_dir=base_dir, policy=policy)
    if path is None:
        return None, issues
    problem = _file_issue(path, path.name, policy, at)
    return (None, [problem]) if problem is not None else (path, [])


def open_input(
    spec: dict[str, Any],
    *,
    at: str,
    base_dir: Path,
    data_file: Path | None,
    policy: DataPolicy,
    columns: dict[str, str] | None = None,
    files: dict[tuple[int, int], columnar.FileTable] | None = None,
    named: Collection[str] = (),
) -> tuple[ColumnSource | None, list[SpecIssue]]:
    """The public phase of one query's input: where it is, and that its columns exist.

    ``columns`` maps every column the query needs besides ``input.column`` (group columns, the
    id column) to the JSON Pointer of the field that names it. ``files`` collects one
    :class:`~dpkit.spec.columnar.FileTable` per file (by identity), so that a file is read once
    for all the queries of a spec. ``named``: every column the spec names; a missing column
    close to one of those that the file has gets a "did you mean" (the header itself is never
    quoted).
    """
    if spec["source"] == "inline":
        return ColumnSource("inline values", inline=tuple(spec["values"])), []
    try:
        columnar.pyarrow()
    except MissingDependency as error:
        return None, [SpecIssue(f"{at}/source", error.code, str(error))]
    if data_file is not None:  # named on the command line by whoever runs it: anywhere
        path, where = Path(data_file), at
    elif "path" in spec:
        where = f"{at}/path"
        allowed, refusals = _allowed_path(spec["path"], at=where, base_dir=base_dir, policy=policy)
        if allowed is None:
            return None, refusals
        path = allowed
    else:
        return None, [
            SpecIssue(f"{at}/path", "data_missing", "no input file: give input.path or --data")
        ]
    shown = path.name
    problem = _file_issue(path, shown, policy, where)
    if problem is not None:
        return None, [problem]
    kind = spec["source"]
    read_header = _parquet_header if kind == "parquet" else _header
    header, identity, problem = read_header(path, shown, where)
    if problem is not None or header is None or identity is None:
        return None, [problem] if problem else []
    wanted = {spec["column"]: f"{at}/column", **(columns or {})}
    issues = []
    for column, pointer in wanted.items():
        found = header.count(column)
        if found != 1:
            issues.append(
                SpecIssue(
                    pointer,
                    "column_not_found" if found == 0 else "column_ambiguous",
                    f"column {column!r} is "
                    + ("not in" if found == 0 else f"{found} times in")
                    + f" the header of {shown} ({len(header)} column(s); the header is not shown)"
                    + (_did_you_mean(column, named, header) if found == 0 else ""),
                )
            )
    if not issues and kind == "parquet":
        issues = _unreadable_issues(path, shown, wanted)
    if issues:
        return None, issues
    files = {} if files is None else files
    table = files.get(identity)
    if table is None:
        table = files[identity] = columnar.FileTable(
            path,
            identity,
            policy.max_bytes,
            kind=kind,
            header=tuple(header),
            progress=policy.progress,
        )
    table.need(*wanted)
    return ColumnSource(shown, path=path, column=spec["column"], table=table), []


def _did_you_mean(column: str, named: Collection[str], header: Sequence[str]) -> str:
    """``; did you mean 'age'?`` from the columns the spec names elsewhere that the file has
    (public: the spec names them), never from the rest of the header."""
    public = sorted(name for name in named if name != column and header.count(name) == 1)
    close = difflib.get_close_matches(column, public, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def _text_key(value: Any) -> str | None:
    """How a cell (or an inline value) is compared with declared categories: its text."""
    if value is None:
        return None
    return (value if isinstance(value, str) else str(value)).strip()


def encode_categories(values: NDArray[Any], categories: list[Any]) -> NDArray[np.int64]:
    """Cells → indices 0..k−1 by position in ``categories`` (private phase; total).

    A cell matches the category whose text it is (``"02139"`` matches the category "02139",
    ``"1"`` the category 1, ``"NA"`` a declared category "NA"), compared before any conversion
    to numbers or to missing values. Any other cell becomes −1, outside the mechanism's domain,
    so the session's per-record ``coerce`` replaces it (local mechanisms: a uniformly random
    category, keeping n and every report's ε-LDP guarantee).
    """
    table: dict[str, int] = {}
    for index, label in enumerate(categories):
        table.setdefault(str(label), index)
    keys = (_text_key(v) for v in values.tolist())
    return np.fromiter(
        (table.get(k, -1) if k is not None else -1 for k in keys),
        dtype=np.int64,
        count=values.shape[0],
    )


def match_categories(values: NDArray[Any], categories: tuple[Any, ...]) -> NDArray[Any]:
    """Cells → the declared category they spell (private phase; total), for a query that
    matches categories by value (a histogram): a cell is its category if its text is the
    category's text; otherwise it is missing (None) if it reads as missing, else its text,
    which matches no category (dropped, or counted as "other")."""
    table: dict[str, Any] = {}
    for label in categories:
        table.setdefault(str(label), label)
    out = np.empty(values.shape[0], dtype=object)
    for i, value in enumerate(values.tolist()):
        key = _text_key(value)
        if key is None:
            out[i] = None
        elif key in table:
            out[i] = table[key]
        else:
            out[i] = None if key.lower() in _MISSING else key
    return out
