"""Reading a spec's CSV and Parquet files in one columnar pass: each file once, only the needed
columns, with the private phase's totality kept (``docs/security.md``, "The privacy boundary").

A spec may ask many queries of one file; :class:`FileTable` collects, at plan time, every
column any query needs from it, and reads them all at the first load after the spend (PyArrow's
multi-threaded CSV reader, or its Parquet reader), keeping the raw columns for the other queries.
Each query then converts the columns it needs (cached):

* **cells** are the CSV records, **one per line** (CR, LF or CRLF line ends), each line
  parsed alone with RFC 4180 quoting (quoted commas, doubled quotes; a UTF-8 BOM skipped),
  read as raw bytes so that no byte sequence can make the reader fail. A quoted value cannot
  span lines: a line that leaves a quote open is one record, cut at its line end. Framing by
  lines is what makes a file's records stable — with quoted line ends, one person's record
  that opens a quote and never closes it would swallow every record after it — so a file's
  privacy unit (under :class:`~dpkit.units.RecordUnit`) is a line. A record whose number of
  fields differs from the header's is **dropped**, and so is an empty line (per-record
  transformations). PyArrow parses the file when its records are its lines
  (:func:`_line_framed`: always when the file has no quote); otherwise, or if PyArrow cannot
  parse the file at all (a record of the wrong width, a field longer than the whole file as
  one block), Python's ``csv`` module reads it line by line with the same rules, so nothing
  raises;
* **numbers** (:func:`numbers`): a cell is a number if it is a decimal number — optional sign,
  digits with an optional fraction or a fraction alone, optional exponent — or ``inf`` /
  ``infinity`` (any case, optional sign), with optional surrounding whitespace; ``1e999``
  is +inf (clamped later). Anything else (empty, ``NA``, ``nan``, text, a NUL byte, invalid
  UTF-8) is missing;
* **labels** (:func:`labels`): the cell's text (invalid UTF-8 replaced), stripped; empty or
  ``NA``/``NaN``/``null``/``None`` (any case) is missing, unless it spells one of the declared
  categories or keys (so ``"NA"`` can be a category);
* **ids** (:func:`ids`): an integer code per distinct id (an empty cell is missing): a cell
  that spells a plain integer is that integer (so ``7`` and ``007`` are one id, one person:
  the privacy unit is the integer), any other cell a 64-bit hash of its exact bytes — cell
  by cell, so a person's code never moves when others are added.

Every conversion is vectorised (PyArrow compute) and per cell: converting a cell never depends
on another. The file read is the one checked in the public phase: it is opened once, its
identity (device, inode) and size are checked on the open descriptor, and the reader reads from
that descriptor (a swapped or grown file is read as no records).
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import MissingDependency

__all__ = [
    "MISSING_TOKENS",
    "FileTable",
    "Progress",
    "ids",
    "labels",
    "numbers",
    "parquet_columns",
    "parquet_unreadable",
    "pyarrow",
    "texts",
]

#: Cell texts read as missing (compared lower-case, after stripping).
MISSING_TOKENS = ("", "na", "nan", "null", "none")
#: CSV blocks parsed at a time; a record longer than this is retried with the file as one block.
BLOCK_BYTES = 16 << 20
#: Bytes scanned at a time when checking that the records are framed by lines.
SCAN_BYTES = 4 << 20
_LF, _CR = 10, 13

_SPACE = r"[ \t\r\n\v\f]*"
_DECIMAL = rf"^{_SPACE}[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?{_SPACE}$"
_INFINITE = rf"(?i)^{_SPACE}([+-]?)inf(inity)?{_SPACE}$"
_INTEGER = re.compile(rb"[+-]?[0-9]+")

#: ``progress(file_name, bytes_read, total_bytes)``, called after each batch the reader parses
#: (bytes only grow), and once at the end with ``bytes_read == total_bytes``.
Progress = Callable[[str, int, int], None]


def pyarrow() -> Any:
    """The ``pyarrow`` module, or :class:`~dpkit.errors.MissingDependency` naming the extra."""
    try:
        import pyarrow as pa
        import pyarrow.compute
        import pyarrow.csv
    except ImportError:
        raise MissingDependency(
            "pyarrow", "tables", needed_by="CSV and Parquet inputs", plural=True
        ) from None
    # PyArrow's own SIGINT handling during a read would end the process with the bare signal
    # (no exit 130, no one-line message); let Python's KeyboardInterrupt handling see it.
    pa.enable_signal_handlers(False)
    return pa


def numbers(cells: Any) -> Any:
    """Cells (binary, string or numeric PyArrow array) → float64, NaN where missing (total).

    The plain path casts valid UTF-8 straight to float64 (a column of clean numbers); if any
    cell does not parse, every cell goes through the decimal and infinity patterns of the module
    docstring instead. A cell the plain cast accepts is one the patterns accept with the same
    value (checked by the tests), so the result never depends on which path ran.
    """
    pa = pyarrow()
    pc = pa.compute
    typed = pa.types.is_floating(cells.type) or pa.types.is_integer(cells.type)
    if typed or pa.types.is_boolean(cells.type) or pa.types.is_decimal(cells.type):
        try:  # a typed Parquet column: its numbers, null → NaN
            return pc.fill_null(pc.cast(cells, pa.float64()), np.nan)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            cells = pc.cast(cells, pa.string())
    raw = _empty_as_null(as_bytes(cells))
    text = pa.large_string() if pa.types.is_large_binary(raw.type) else pa.string()
    try:
        return pc.fill_null(pc.cast(pc.cast(raw, text), pa.float64()), np.nan)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    decimal = pc.fill_null(pc.match_substring_regex(raw, _DECIMAL), False)
    kept = pc.if_else(decimal, raw, pa.scalar(None, raw.type))
    values = pc.fill_null(pc.cast(pc.utf8_trim_whitespace(kept.cast(text)), pa.float64()), np.nan)
    infinite = pc.fill_null(pc.match_substring_regex(raw, _INFINITE), False)
    negative = pc.fill_null(pc.match_substring_regex(raw, rf"^{_SPACE}-"), False)
    signed = pc.if_else(negative, pa.scalar(-np.inf), pa.scalar(np.inf))
    return pc.if_else(infinite, signed, values)


def as_bytes(cells: Any) -> Any:
    """Cells as ``binary`` (or ``large_binary``): the bytes of each cell as written. Text and
    bytes of every layout (large, view, fixed-size, dictionary-encoded) are never decoded —
    a cell that is not UTF-8 stays a cell, to be read by the conversion's rule, rather than
    make a cast to text fail (after the spend, as one cell decides); a column of another type
    (dates, decimals, lists) is cast to its text."""
    pa = pyarrow()
    pc = pa.compute
    kind = cells.type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_binary(cells.type):
        return cells
    if pa.types.is_string(cells.type):
        return cells.cast(pa.binary())
    if (
        pa.types.is_binary(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary_view(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_fixed_size_binary(kind)
    ):
        return pc.cast(cells, pa.large_binary())
    return pc.cast(pc.cast(cells, pa.large_string()), pa.large_binary())


def _empty_as_null(raw: Any) -> Any:
    """Binary cells with every empty cell null (a null stays null), chunk by chunk.

    A new validity bitmap over the same offsets and bytes: no cell is copied (``if_else``
    copied every cell, 0.7 s per 10⁷)."""
    pa = pyarrow()
    pc = pa.compute
    if isinstance(raw, pa.ChunkedArray):
        return pa.chunked_array([_empty_as_null(chunk) for chunk in raw.chunks], raw.type)
    filled = pc.fill_null(pc.greater(pc.binary_length(raw), 0), False)
    if pc.all(filled).as_py() is not False:
        return raw
    if raw.offset or filled.offset or not pa.types.is_binary(raw.type):
        return pc.if_else(filled, raw, pa.scalar(None, raw.type))
    return pa.Array.from_buffers(raw.type, len(raw), [filled.buffers()[1], *raw.buffers()[1:]])


def _decode(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", errors="replace")


def _dictionary(cells: Any) -> tuple[list[Any], list[Any]]:
    """The cells dictionary-encoded as binary: (the distinct cells, each chunk's indices into
    them). One dictionary for all chunks (PyArrow encodes a chunked array with one table)."""
    pa = pyarrow()
    pc = pa.compute
    encoded = pc.dictionary_encode(as_bytes(cells))
    chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    distinct = chunks[0].dictionary.to_pylist() if chunks else []
    return distinct, [chunk.indices for chunk in chunks]


def _mapped(position: Any, indices: list[Any], dictionary: Any = None) -> Any:
    """``position`` taken at every chunk's indices (a dictionary array's, if ``dictionary``)."""
    pa = pyarrow()
    parts = [position.take(chunk) for chunk in indices]
    if dictionary is not None:
        parts = [pa.DictionaryArray.from_arrays(part, dictionary) for part in parts]
        kind = pa.dictionary(position.type, dictionary.type)
    else:
        kind = position.type
    return parts[0] if len(parts) == 1 else pa.chunked_array(parts, kind)


def texts(cells: Any, encoded: tuple[list[Any], list[Any]] | None = None) -> Any:
    """Cells → their text as written (invalid UTF-8 replaced; PyArrow string array).
    ``encoded``: the cells' dictionary encoding, if already made (for several conversions)."""
    pa = pyarrow()
    distinct, indices = encoded or _dictionary(cells)
    return _mapped(pa.array([_decode(v) for v in distinct], pa.string()), indices)


def labels(
    cells: Any, keep: Iterable[str] = (), encoded: tuple[list[Any], list[Any]] | None = None
) -> Any:
    """Cells → stripped text, null where missing (total), dictionary-encoded.

    The distinct cells are decoded once each (invalid UTF-8 replaced) and mapped back, so the
    cost is one dictionary encoding plus one decode per distinct value; the result keeps the
    dictionary (a PyArrow dictionary array of distinct texts, cells that strip to the same text
    sharing one entry), which groups and matches fast and holds a small integer per row.
    ``keep``: texts that stay values even if they spell a missing token (declared categories
    and keys).
    """
    pa = pyarrow()
    distinct, indices = encoded or _dictionary(cells)
    kept = set(keep)
    texts: dict[str, int] = {}
    position: list[int | None] = []
    for raw in distinct:
        text = (_decode(raw) or "").strip()
        if text.lower() in MISSING_TOKENS and text not in kept:
            position.append(None)
        else:
            position.append(texts.setdefault(text, len(texts)))
    return _mapped(pa.array(position, pa.int32()), indices, pa.array(list(texts), pa.string()))


def ids(cells: Any) -> Any:
    """Cells → an int64 code per id, a function of the cell alone (empty or null → null; total).

    A plain integer (an optional sign and ASCII digits) within int64 is the integer it spells,
    so ``7``, ``+7`` and ``007`` are one id — one person, the unit the bounds and the
    guarantee are about. (Merging two persons does *not* only tighten their bounds: the
    bounding keeps G·R rows of the pair, and adding one of them can move which of the
    other's rows are kept, a change of up to 2·G·R; cells that spell one integer are one
    person by this definition, not two persons merged.) Any other cell is a 64-bit hash of
    its exact bytes (BLAKE2b: two distinct cells share a code with probability about 2⁻⁶⁴,
    which would merge them). The code never depends on the other cells: contribution
    bounding keys each person's priorities on it, so a code that moved when someone else was
    added (a dictionary index in order of appearance) would change which of *other* people's
    rows are kept. A typed integer column is its values (uint64 reinterpreted as int64, the
    same 64 bits); in a typed float column NaN is missing, as null is (were every NaN one
    person, the persons without an id would be bounded as one, as merged persons are).
    """
    pa = pyarrow()
    pc = pa.compute
    if pa.types.is_integer(cells.type):
        return pc.cast(cells, pa.int64(), safe=False)  # uint64 ≥ 2⁶³: the same bits, wrapped
    if pa.types.is_floating(cells.type):  # NaN is a missing id, not the one person "nan"
        cells = pc.if_else(pc.is_nan(cells), pa.scalar(None, cells.type), cells)
    cells = _empty_as_null(as_bytes(cells))
    text = pa.large_string() if pa.types.is_large_binary(cells.type) else pa.string()
    try:  # a column of plain integers (the usual case): one cast, the same codes as below
        # PyArrow's cast reads [-]digits, and also 0x-hexadecimal, which is text here.
        if not any(pc.any(pc.match_substring(cells, x)).as_py() for x in "xX"):
            return pc.cast(pc.cast(cells, text), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass  # text, a '+' sign, an integer beyond int64, invalid UTF-8: cell by cell
    distinct, indices = _dictionary(cells)
    return _mapped(pa.array([_id_code(value) for value in distinct], pa.int64()), indices)


_INT64 = range(-(1 << 63), 1 << 63)


def _id_code(cell: bytes) -> int:
    """The code of one non-empty id cell (see :func:`ids`)."""
    if _INTEGER.fullmatch(cell):
        value = int(cell)
        if value in _INT64:
            return value
        cell = b"i" + str(value).encode()
    digest = hashlib.blake2b(b"dpkit id\0" + cell, digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _conversions(cells: Any, wanted: list[tuple[str, tuple[str, ...]]]) -> list[Any]:
    """One column's conversions (``(how, keep)`` each), its dictionary encoding made once for
    all its ``labels`` and ``text`` conversions."""
    encoded = None
    if sum(how in ("labels", "text") for how, _ in wanted) > 1:
        encoded = _dictionary(cells)
    out = []
    for how, keep in wanted:
        if how == "numbers":
            out.append(numbers(cells))
        elif how == "ids":
            out.append(ids(cells))
        elif how == "text":
            out.append(texts(cells, encoded))
        else:
            out.append(labels(cells, keep, encoded))
    return out


class _Counting(io.RawIOBase):
    """A read-only view of a file descriptor that counts the bytes read (for progress)."""

    def __init__(self, handle: io.BufferedReader, counter: list[int]) -> None:
        self._handle = handle
        self._counter = counter

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._handle.readinto(buffer)
        self._counter[0] += n or 0
        return n or 0


def parquet_columns(handle: io.BufferedReader) -> list[str] | None:
    """A Parquet file's column names, from its footer (public: the schema only; no statistic
    of the footer is ever read or shown). None if it is not a readable Parquet file."""
    schema = _parquet_schema(handle)
    return None if schema is None else [str(name) for name in schema.names]


def parquet_unreadable(handle: io.BufferedReader) -> dict[str, str]:
    """The columns of a Parquet file that no query can read, by name, with their type: those
    whose type has no text form (lists, structs, maps, intervals), which every conversion
    above falls back to. Decided from the footer's schema alone (a cast of an *empty* array of
    the type), so a query on them is refused before the spend instead of failing after it."""
    pa = pyarrow()
    schema = _parquet_schema(handle)
    out = {}
    for field in [] if schema is None else schema:
        try:
            pa.compute.cast(pa.array([], field.type), pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            out[str(field.name)] = str(field.type)
    return out


def _parquet_schema(handle: io.BufferedReader) -> Any:
    pa = pyarrow()
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(handle).schema_arrow
    except (pa.ArrowException, OSError, ValueError):
        return None


def _python_records(handle: io.BufferedReader, header_width: int) -> Iterable[list[str]]:
    """The records line by line, each line parsed *alone* by Python's csv module with
    PyArrow's rules: the header's lines skipped (parsed as the public phase parses it), empty
    lines skipped, records of another width dropped. The line-framed path (see
    :func:`_read_csv`), also the fallback for files PyArrow refuses."""
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", errors="surrogateescape", newline="")
    _unlimited_fields()
    try:
        lines = iter(text)  # split at LF, CRLF and CR, each line ending with its terminator
        next(csv.reader(lines, strict=False), None)  # the header, over as many lines as it took
        for line in lines:
            content = line.rstrip("\r\n")  # a line holds no CR or LF but its terminator
            if not content:
                continue
            row = next(csv.reader((content,), strict=False), [])
            if len(row) == header_width:
                yield row
    except csv.Error:  # not reached by these rules (non-strict, no size limit): never raise
        return
    finally:
        text.detach()  # the caller owns (and closes) the file, not this wrapper


def _blocks(handle: io.BufferedReader, start: int, size: int) -> Iterator[bytes]:
    """The bytes ``start`` to ``size`` of the file, a block at a time (read, not mapped: a
    mapped file's pages would count in the process's peak memory)."""
    handle.seek(start)
    for _ in range(start, size, SCAN_BYTES):
        block = handle.read(SCAN_BYTES)
        if not block:
            return
        yield block


def _line_framed(handle: io.BufferedReader, start: int, size: int, records: int) -> bool:
    """Whether PyArrow's ``records`` are the file's lines one for one — false exactly when a
    quoted value holds a line end, so that PyArrow's framing depends on more than one line.

    A file without a quote character cannot have one. Otherwise the non-empty lines (runs of
    bytes that are neither CR nor LF) are counted block by block: each record of a
    line-framed file is one of them (the header another), and a record whose quote spans a
    line end covers at least two (its line up to the quote, and the line of the closing
    quote), so the counts differ — except for the file's last record, whose open quote can
    swallow the final line ends alone: that record's line is parsed on its own, with a line
    after it, to see whether it leaves a quote open."""
    if not any(b'"' in block for block in _blocks(handle, start, size)):
        return True
    runs, before, last = 0, True, b""  # before: the byte before the block is a line end
    for block in _blocks(handle, start, size):
        data = np.frombuffer(block, dtype=np.uint8)
        ends = data == _LF
        ends |= data == _CR
        # A run starts at a byte that is no line end, after one that is.
        runs += int(np.count_nonzero(ends[:-1] > ends[1:])) + int(before and not ends[0])
        content = block.rstrip(b"\r\n")
        if content:  # the last non-empty line: all in this block, or continued from the last
            cut = max(content.rfind(b"\n"), content.rfind(b"\r"))
            last = content[cut + 1 :] if cut >= 0 else content if before else last + content
        before = bool(ends[-1])
        del data, ends
    if runs != records + 1:  # the header's line and one line per record
        return False
    if b'"' not in last:
        return True
    _unlimited_fields()  # a last line's field of any length (csv's default limit is 128 KiB)
    reader = csv.reader((last.decode("utf-8", "surrogateescape"), "x"), strict=False)
    try:
        next(reader, None)
    except csv.Error:  # not reached by these rules; if it were, the line-by-line path is total
        return False
    return reader.line_num == 1  # the next line was not needed: no quote left open


def _unlimited_fields() -> None:
    """Lift the csv module's field size limit (process-wide; a field is as long as its line)."""
    csv.field_size_limit(sys.maxsize if sys.maxsize < 2**63 else 2**62)


@attrs.define
class FileTable:
    """One input file of a spec, read once for all its queries (private phase, total)."""

    path: Path
    identity: tuple[int, int]
    max_bytes: int
    kind: str = "csv"
    header: tuple[str, ...] = ()
    columns: set[str] = attrs.field(factory=set)
    progress: Progress | None = None
    conversions: set[tuple[str, str, tuple[str, ...]]] = attrs.field(factory=set)
    _converted: dict[tuple[str, str, tuple[str, ...]], Any] | None = None
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def need(self, *columns: str) -> None:
        """Plan time: the file must provide these columns (all are read in the one pass)."""
        self.columns.update(columns)

    def expect(self, column: str, how: str, keep: tuple[str, ...] = ()) -> None:
        """Plan time: a query will read ``column`` converted as ``how`` (``numbers``,
        ``labels`` keeping ``keep``, ``text`` or ``ids``)."""
        self.need(column)
        self.conversions.add((column, how, tuple(keep)))

    def converted(self, column: str, how: str, keep: tuple[str, ...] = ()) -> Any:
        """The column as ``numbers``, ``labels`` (with ``keep``), ``text`` or ``ids``.

        At the first call the file is read (one pass) and every expected conversion is made;
        the raw cells are then released, so only the converted columns stay in memory. An
        unexpected conversion is an empty column (a query must declare what it reads)."""
        with self._lock:
            if self._converted is None:
                self._converted = self._convert_all(self._read())
        found = self._converted.get((column, how, tuple(keep)))
        if found is None:
            pa = pyarrow()
            return pa.array([], pa.float64() if how == "numbers" else pa.string())
        return found

    def _convert_all(self, raw: dict[str, Any]) -> dict[tuple[str, str, tuple[str, ...]], Any]:
        """Every expected conversion, column by column on two threads (PyArrow's kernels
        release the GIL); a column's raw cells are freed once its conversions are made."""
        pa = pyarrow()
        by_column: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for name, how, keep in sorted(self.conversions):
            by_column.setdefault(name, []).append((how, keep))

        def convert(name: str, wanted: list[tuple[str, tuple[str, ...]]]) -> list[Any]:
            cells = raw.pop(name, None)
            return _conversions(pa.array([], pa.binary()) if cells is None else cells, wanted)

        converted = {}
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {name: pool.submit(convert, name, w) for name, w in by_column.items()}
            for name, wanted in by_column.items():
                for (how, keep), array in zip(wanted, futures[name].result(), strict=True):
                    converted[(name, how, keep)] = array
        # The raw cells are freed, but PyArrow's allocator keeps their pages (some 600 MB for
        # 10⁷ rows of 5 columns), which numpy, the queries' other allocator, cannot reuse.
        pa.default_memory_pool().release_unused()
        return converted

    def _read(self) -> dict[str, Any]:
        from dpkit.spec.data import open_regular

        pa = pyarrow()
        handle = open_regular(self.path)
        if handle is None:
            return {}
        with handle:
            info = os.fstat(handle.fileno())
            if (info.st_dev, info.st_ino) != self.identity or info.st_size > self.max_bytes:
                return {}  # not the file that was checked: read nothing, never another file
            wanted = sorted(self.columns)
            if self.kind == "parquet":
                return _read_parquet(handle, wanted)
            counter = [0]
            progress = self.progress
            name = self.path.name

            def batch_read(parsed: int) -> None:
                if progress is not None:
                    progress(name, parsed, info.st_size)

            try:
                return _read_csv(handle, counter, wanted, info.st_size, self.header, batch_read)
            finally:
                if progress is not None:
                    progress(name, info.st_size, info.st_size)
        del pa


def _read_parquet(handle: io.BufferedReader, wanted: list[str]) -> dict[str, Any]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(handle, columns=wanted)
    except Exception:  # a damaged data page: documented as read as no records
        return {}
    return {name: table.column(name) for name in table.column_names}


def _read_csv(
    handle: io.BufferedReader,
    counter: list[int],
    wanted: list[str],
    size: int,
    header: tuple[str, ...],
    batch_read: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The ``wanted`` columns of a CSV file as binary cells, in PyArrow's streaming reader's
    batches. After the i-th, ``batch_read`` (progress) gets i whole blocks, the bytes parsed
    so far as the file's blocks count them, while that is below the file's size: a batch is at
    most one block (cut at a record's end), so there are at least ⌈size/block⌉ batches and the
    values shown are block, 2·block, … below the size whatever the records. (The bytes *read*
    would not do: the reader reads ahead of what it has parsed.) A record the reader refuses
    stops the first pass where it lies, and the file is read again: the progress then stops
    short and jumps to the end, which tells no more than the read's duration, an open timing
    channel (docs/security.md)."""
    pa = pyarrow()
    # No invalid-row handler: PyArrow decodes a bad row as UTF-8 to hand it over, and a row
    # that is not UTF-8 then prints an "Exception ignored" traceback. A file with a row of the
    # wrong width, or whose quoted values span lines, is read by the Python path instead (line
    # by line; the same cells wherever PyArrow's records are the lines).
    parse = pa.csv.ParseOptions(newlines_in_values=True)
    convert = pa.csv.ConvertOptions(
        column_types=dict.fromkeys(wanted, pa.binary()),
        include_columns=wanted,
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    start = handle.tell()
    for block in (BLOCK_BYTES, max(size + 1, BLOCK_BYTES)):
        if block >= 1 << 31:
            break
        handle.seek(start)
        # The counter is never reset: progress only grows, so it cannot show that a first
        # attempt failed (which depends on the records: a malformed one, a huge field).
        try:
            options = pa.csv.ReadOptions(block_size=block)
            reader = pa.csv.open_csv(
                _Counting(handle, counter),
                read_options=options,
                parse_options=parse,
                convert_options=convert,
            )
            batches = []
            for batch in reader:
                batches.append(batch)
                if batch_read is not None and len(batches) * block < size:
                    batch_read(len(batches) * block)
            table = pa.Table.from_batches(batches, schema=reader.schema)
        except Exception:
            continue
        if _line_framed(handle, start, size, table.num_rows):
            # Chunks as read: every conversion is per cell, so it runs chunk by chunk
            # (combining them first cost a copy of every column).
            return {name: table.column(name) for name in table.column_names}
        break  # a quoted value spans lines: the records are read line by line instead
    handle.seek(start)
    index = {name: header.index(name) for name in wanted if name in header}
    cells: dict[str, list[bytes]] = {name: [] for name in index}
    for row in _python_records(handle, len(header)):
        for name, i in index.items():
            cells[name].append(row[i].encode("utf-8", errors="surrogateescape"))
    return {name: pa.array(values, pa.binary()) for name, values in cells.items()}


def as_numpy(array: Any) -> NDArray[Any]:
    """A PyArrow array as numpy (float64 as is, strings as an object array with None)."""
    pa = pyarrow()
    if pa.types.is_floating(array.type):
        return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)
    out = np.empty(len(array), dtype=object)
    out[:] = array.to_pylist()
    return out
